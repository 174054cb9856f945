// The README's Player example (issue 27, item 9), compiled and run: the lines between the two markers, with
// the test function's two opening lines left out and the body's indentation removed, are the README snippet,
// line for line. The README counts them against GRDB's, as `noLongerThanGRDB` below does.
import Foundation
import Testing

// README snippet begins
import ProtectedStoreTesting

struct Player: Codable, FetchableRecord, PersistableRecord {
    var id: String
    var name: String
    var score: Int
}

@Test("the README's Player example inserts two players and reads them back") @MainActor
func playerExample() async throws {
    var migrator = DatabaseMigrator.keyValue
    migrator.registerMigration("create player") { db in
        try db.execute("CREATE TABLE player(id TEXT PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL)")
    }
    let environment = try ProtectedStoreTestEnvironment()  // an app passes its key source to a DataController
    let controller = await environment.launch(store: StoreConfiguration(path: environment.storePath(), migrator: migrator))

    try await controller.perform("add players") { store in
        try await store.write { db in
            try Player(id: "1", name: "Arthur", score: 100).insert(db)
            try Player(id: "2", name: "Barbara", score: 1000).insert(db)
        }
    }
    let players = try await controller.read { db in
        try Player.fetchAll(db)
    }
    // README snippet ends
    #expect(players.map(\.id) == ["1", "2"])
    #expect(players.map(\.name) == ["Arthur", "Barbara"])
    #expect(players.map(\.score) == [100, 1000])
}

/// The README's promise beside the example: it is no longer than GRDB's.
@Suite("The Player example")
struct PlayerExampleShapeTests {
    /// GRDB 7's README example (open a queue, create the table, the record type, insert two players, fetch
    /// them), counted the same way: lines that are neither blank nor only a comment.
    static let grdbLineCount = 21

    @Test("the Player example is no longer than GRDB's, counting lines that are neither blank nor only a comment")
    func noLongerThanGRDB() throws {
        let source = try String(contentsOfFile: #filePath, encoding: .utf8)
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex { $0.hasSuffix("// README snippet begins") })
        let end = try #require(lines.firstIndex { $0.hasSuffix("// README snippet ends") })
        let counted = lines[(start + 1)..<end].filter { line in
            let text = line.trimmingCharacters(in: .whitespaces)
            // The test's own `@Test` attribute line is not part of the README snippet.
            return !text.isEmpty && !text.hasPrefix("//") && !text.hasPrefix("@Test") && !text.hasPrefix("func playerExample")
        }
        #expect(counted.count <= Self.grdbLineCount, "\(counted.count) lines")
    }

    @Test("a cursor in a store read iterates the table's records one at a time")
    @MainActor
    func cursorInAStoreRead() async throws {
        var migrator = DatabaseMigrator.keyValue
        migrator.registerMigration("create player") { db in
            try db.execute("CREATE TABLE player(id TEXT PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL)")
        }
        let environment = try ProtectedStoreTestEnvironment()
        let controller = await environment.launch(store: StoreConfiguration(path: environment.storePath(), migrator: migrator))
        try await controller.perform("add players") { store in
            try await store.write { db in
                for index in 1...500 { try Player(id: "\(index)", name: "p\(index)", score: index).insert(db) }
            }
        }
        let (total, count) = try await controller.read { db in
            let players = try Player.fetchCursor(db)
            var total = 0
            while let player = try players.next() { total += player.score }
            return (total, try Player.fetchCount(db))
        }
        #expect(total == 500 * 501 / 2)
        #expect(count == 500)
    }
}
