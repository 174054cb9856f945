import ProtectedStoreTesting
import Testing

private struct Player: Codable, FetchableRecord, PersistableRecord {
    var id: String
    var name: String
    var score: Int
}

/// Records and cursors through the public API only, in a store's reads and writes (issue 27, items 9 and 11).
@Suite("Records in a store")
struct RecordsInAStoreTests {
    @Test("a cursor in a store read iterates the table's records one at a time")
    @MainActor
    func cursorInAStoreRead() async throws {
        var migrator = DatabaseMigrator.keyValue
        migrator.registerMigration("create player") { db in
            try db.execute("CREATE TABLE player(id TEXT PRIMARY KEY, name TEXT NOT NULL, score INTEGER NOT NULL)")
        }
        let environment = try ProtectedStoreTestEnvironment()
        let controller = await environment.launch(store: StoreConfiguration(path: environment.storePath(), migrator: migrator))
        try await controller.perform("add players") { coordinator in
            try await coordinator.write { db in
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
