import Foundation
import Testing

// The README's Player feature, side by side with GRDB's (scripts/doc-snippets.py checks that the region is, byte
// for byte, the README's block): a migration, insert, update, fetch by id, delete by id, count, an observed list
// and a savepoint that rolls back.

// snippet.readme-player-feature
import ProtectedStore
// snippet.hide

/// What the observed list showed last.
@MainActor
final class ShownPlayers {
    var names: [String] = []
}

/// The README's Player feature, run, and its length held to GRDB's.
@MainActor
@Suite("README.md: the Player feature", .timeLimit(.minutes(3)))
struct ReadmePlayerFeatureSnippet {
    @Test("readme-player-feature: insert, update, fetch, delete and count; the observed list; the savepoint's rollback")
    func feature() async throws {
        let device = try SnippetDevice()
        let (documents, keys) = (device.documents, device.keys)
        // snippet.show

        struct Player: Codable, FetchableRecord, PersistableRecord {
            var id: Int64?
            var name: String
            var score: Int

            mutating func didInsert(rowID: Int64) {
                id = rowID
            }
        }
        // snippet.hide
        let shown = ShownPlayers()
        func show(_ players: [Player]) { shown.names = players.map(\.name) }
        // snippet.show

        var migrator = DatabaseMigrator()
        migrator.registerMigration("create player") { db in
            try db.execute("CREATE TABLE player(id INTEGER PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL)")
        }
        let store = StoreConfiguration(path: documents + "/Players.sqlite", migrator: migrator)
        let controller = DataController(configuration: .init(store: store), keys: keys)
        controller.launch()

        // Insert, update, fetch by id, delete by id, count.
        var arthur = try await controller.write { db in
            try Player(id: nil, name: "Arthur", score: 100).inserted(db)
        }
        arthur.score = 200
        try await controller.write { [arthur] db in try arthur.update(db) }
        let fetched = try await controller.read { [arthur] db in try Player.fetchOne(db, key: arthur.id) }
        let barbara = try await controller.write { db in
            try Player(id: nil, name: "Barbara", score: 1000).inserted(db)
        }
        try await controller.write { db in try Player.deleteOne(db, key: barbara.id) }
        let count = try await controller.read { db in try Player.fetchCount(db) }

        // An observed list, best first.
        let observation = Task {
            for try await players in controller.values(tracking: { db in
                try db.fetchAll(Player.self, "SELECT * FROM player ORDER BY score DESC")
            }) {
                show(players)
            }
        }

        // A savepoint that rolls back: the duplicate is undone, the write commits Craig.
        try await controller.write { [arthur] db in
            _ = try? db.inSavepoint { try arthur.insert(db) }
            try Player(id: nil, name: "Craig", score: 5).insert(db)
        }
        // snippet.end
        #expect(arthur.id != nil && barbara.id != nil && arthur.id != barbara.id, "inserted gave each its key")
        #expect(fetched?.score == 200, "the update was written")
        #expect(count == 1, "Barbara was deleted by her key")
        #expect(try await controller.read { db in try Player.fetchAll(db).map(\.name) } == ["Arthur", "Craig"])
        let missing = await #expect(throws: StoreError.self) {
            try await controller.write { db in try Player(id: 999, name: "Nobody", score: 0).update(db) }
        }
        #expect(missing?.code == .recordNotFound)
        // The observed list follows the writes: Arthur and Craig, best first.
        while shown.names != ["Arthur", "Craig"] { try await Task.sleep(for: .milliseconds(10)) }
        observation.cancel()
        await controller.terminate()
    }

    @Test("the Player feature is no longer than GRDB's, counting lines that are neither blank nor only a comment")
    func noLongerThanGRDB() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../README.md")
        let grdb = try Self.lineCount(ofBlockAfter: "the Player feature with GRDB", in: String(contentsOf: readme, encoding: .utf8))
        let ours = try ReadmePlayerSnippet.shownLineCount(
            ofRegion: "readme-player-feature", in: String(contentsOfFile: #filePath, encoding: .utf8))
        #expect(ours <= grdb, "\(ours) lines against GRDB's \(grdb)")
        #expect(ours > 30 && grdb > 30, "both blocks were found whole: \(ours), \(grdb)")
    }

    /// The lines of the first ```swift block after the line that contains `marker` that are neither blank nor
    /// only a comment.
    static func lineCount(ofBlockAfter marker: String, in text: String) throws -> Int {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let markerIndex = lines.firstIndex(where: { $0.contains(marker) }),
            let start = lines[markerIndex...].firstIndex(where: { $0.hasPrefix("```swift") }),
            let end = lines[(start + 1)...].firstIndex(where: { $0.hasPrefix("```") })
        else { throw CocoaError(.fileReadCorruptFile) }
        return lines[(start + 1)..<end].filter {
            let text = $0.trimmingCharacters(in: .whitespaces)
            return !text.isEmpty && !text.hasPrefix("//")
        }.count
    }
}
