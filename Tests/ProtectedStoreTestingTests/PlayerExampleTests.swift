// The README's Player example (issue 27, item 9), compiled and run: the lines between the two markers, with
// the test function's `@Test` line and its closing brace left out and the body's indentation removed, are the
// README snippet, line for line. /work/notes/records.md counts them against GRDB's.
import Testing

// README snippet begins
import ProtectedStoreTesting

struct Player: Codable, Equatable, FetchableRecord, PersistableRecord {
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
    #expect(players == [Player(id: "1", name: "Arthur", score: 100), Player(id: "2", name: "Barbara", score: 1000)])
}
