import Foundation
import Testing

// The README's Player example, side by side with GRDB's (issue 27, item 9; scripts/doc-snippets.py checks that
// the region is, byte for byte, the README's block).

// snippet.readme-player
import ProtectedStore

struct Player: Codable, FetchableRecord, PersistableRecord {
    var id: String
    var name: String
    var score: Int
}
// snippet.hide

/// The README's Player example, run, and its length held to GRDB's.
@MainActor
@Suite("README.md: the Player example", .timeLimit(.minutes(3)))
struct ReadmePlayerSnippet {
    /// GRDB 7's README example (open a queue, create the table, the record type, insert two players, fetch them)
    /// counted as `shownLineCount` counts: 21 lines that are neither blank nor only a comment.
    static let grdbLineCount = 21

    @Test("readme-player: the players inserted are read back")
    func player() async throws {
        let device = try SnippetDevice()
        let (documents, keys) = (device.documents, device.keys)
        // snippet.show

        var migrator = DatabaseMigrator()
        migrator.registerMigration("create player") { db in
            try db.execute("""
                CREATE TABLE player(
                    id TEXT PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL)
                """)
        }
        let store = StoreConfiguration(path: documents + "/Players.sqlite", migrator: migrator)
        let controller = DataController(configuration: .init(store: store), keys: keys)
        controller.launch()

        try await controller.write { db in
            try Player(id: "1", name: "Arthur", score: 100).insert(db)
            try Player(id: "2", name: "Barbara", score: 1000).insert(db)
        }
        let players = try await controller.read { db in try Player.fetchAll(db) }
        // snippet.end
        #expect(players.map(\.id) == ["1", "2"])
        #expect(players.map(\.name) == ["Arthur", "Barbara"])
        #expect(players.map(\.score) == [100, 1000])
        await controller.terminate()
    }

    @Test("readme-records-cursor: a cursor reads the players one at a time inside a read")
    func cursor() async throws {
        let device = try SnippetDevice()
        var migrator = DatabaseMigrator.keyValue
        migrator.registerMigration("create player") { db in
            try db.execute("CREATE TABLE player(id TEXT PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL)")
        }
        let store = StoreConfiguration(path: device.documents + "/Players.sqlite", migrator: migrator)
        let controller = DataController(configuration: .init(store: store), keys: device.keys)
        controller.launch()
        try await controller.perform("add players") { coordinator in
            try await coordinator.write { db in
                for index in 1...1_000 { try Player(id: "\(index)", name: "p\(index)", score: index).insert(db) }
            }
        }
        // snippet.readme-records-cursor
        let total = try await controller.read { db in
            let players = try Player.fetchCursor(db)
            var total = 0
            while let player = try players.next() { total += player.score }
            return total
        }
        // snippet.end
        #expect(total == 1_000 * 1_001 / 2)
        await controller.terminate()
    }

    @Test("the Player example is no longer than GRDB's, counting lines that are neither blank nor only a comment")
    func noLongerThanGRDB() throws {
        let count = try Self.shownLineCount(ofRegion: "readme-player", in: String(contentsOfFile: #filePath, encoding: .utf8))
        #expect(count <= Self.grdbLineCount, "\(count) lines against GRDB's \(Self.grdbLineCount)")
        #expect(count > 0)
    }

    /// The lines of `region` the document shows (outside `snippet.hide` … `snippet.show`) that are neither
    /// blank nor only a comment.
    static func shownLineCount(ofRegion region: String, in source: String) throws -> Int {
        var inRegion = false
        var shown = false
        var count = 0
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let text = line.trimmingCharacters(in: .whitespaces)
            switch text {
            case "// snippet.\(region)": (inRegion, shown) = (true, true)
            case "// snippet.hide" where inRegion: shown = false
            case "// snippet.show" where inRegion: shown = true
            case "// snippet.end" where inRegion: return count
            default: if inRegion && shown && !text.isEmpty && !text.hasPrefix("//") { count += 1 }
            }
        }
        throw CocoaError(.fileReadCorruptFile)
    }
}
