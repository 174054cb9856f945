import Testing

// The README's blocks in "The data layer: reads, writes, records, migrations, observation"
// (scripts/doc-snippets.py checks that each region is, byte for byte, a block of the README).

// snippet.readme-data-layer
import Foundation
import ProtectedStore

struct Note: Codable, Sendable {
    var id: UUID
    var title: String
    var createdAt: Date
    var pinned: Bool
    var tags: [String]        // not a column type: stored as JSON text
}
// snippet.hide

/// The README's data layer: a schema, a write, reads, observation, and savepoints.
@MainActor
@Suite("README.md: the data layer", .timeLimit(.minutes(3)))
struct ReadmeDataLayerSnippet {
    @Test("readme-data-layer: migrations, a write, a read on a reader, a read from the controller, and observation")
    func dataLayer() async throws {
        let device = try SnippetDevice()
        let documents = device.documents
        // snippet.show

        var migrator = DatabaseMigrator.keyValue          // the `entries` table the key-value calls use
        migrator.registerMigration("create notes") { db in
            try db.execute("""
                CREATE TABLE notes(id BLOB PRIMARY KEY NOT NULL, title TEXT NOT NULL, createdAt TEXT NOT NULL,
                                   pinned INTEGER NOT NULL, tags TEXT NOT NULL)
                """)
        }
        migrator.registerMigration("index notes by date") { db in
            try db.execute("CREATE INDEX notes_by_date ON notes(createdAt)")
        }
        let store = StoreConfiguration(path: documents + "/Notes.sqlite", migrator: migrator)
        // snippet.hide
        let dataController = DataController(configuration: .init(store: store), keys: device.keys)
        dataController.launch(LaunchOptions())
        await waitForPhase(dataController) { $0 == .ready }
        let coordinator = try #require(dataController.coordinator)
        let note = Note(id: UUID(), title: "first", createdAt: Date(), pinned: false, tags: ["a", "b"])
        let since = Date(timeIntervalSinceNow: -60)
        var shown: [[Note]] = []
        func show(_ notes: [Note]) {
            shown.append(notes)
            if shown.count == 1 {  // a commit to `notes` gives a fresh value
                Task {
                    try await coordinator.write { db in
                        try db.insert(Note(id: UUID(), title: "second", createdAt: Date(), pinned: false, tags: []), into: "notes")
                    }
                }
            } else {
                Task { await dataController.terminate() }  // the sequence ends when the controller terminates
            }
        }
        // snippet.show

        // Writes: one at a time, in an immediate transaction, durable when they return.
        try await coordinator.write { db in
            try db.insert(note, into: "notes")
            try db.execute("UPDATE notes SET pinned = :pinned WHERE id = :id", ["pinned": true, "id": note.id])
        }
        // Reads: on a reader, beside the writer; never wait for a write.
        let recent = try await coordinator.read { db in
            try db.fetchAll(Note.self, "SELECT * FROM notes WHERE createdAt > ? ORDER BY createdAt DESC", [since])
        }
        // From UI code that may run before the store is ready: waits for the deferred setup (not for queued
        // operations or a running write), then reads on a reader.
        let count = try await dataController.read { db in try db.fetchValue(Int.self, "SELECT count(*) FROM notes") }
        // Observation: a fresh value after every commit that touches `notes` — inbox merges included.
        for try await notes in dataController.values(tracking: { db in
            try db.fetchAll(Note.self, "SELECT * FROM notes ORDER BY createdAt DESC")
        }) {
            show(notes)
        }
        // snippet.end
        #expect(recent.count == 1)
        #expect(recent.first?.id == note.id && recent.first?.pinned == true && recent.first?.tags == ["a", "b"])
        #expect(count == 1)
        #expect(shown.map(\.count) == [1, 2])
        #expect(shown.last?.first?.title == "second")  // newest first
    }

    /// A message of the batch the savepoint block imports.
    struct Message {
        var id: Int64
        var body: String
        var thread: Int64
    }

    @Test("readme-savepoints: a message that hits a constraint is rolled back alone; the rest of the write commits")
    func savepoints() async throws {
        let device = try SnippetDevice()
        var migrator = DatabaseMigrator()
        migrator.registerMigration("messages") { db in
            try db.execute("CREATE TABLE thread(id INTEGER PRIMARY KEY, unread INTEGER NOT NULL CHECK (unread <= 1))")
            try db.execute("CREATE TABLE message(id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
            try db.execute("INSERT INTO thread(id, unread) VALUES (1, 0), (2, 0)")
        }
        let dataController = DataController(
            configuration: .init(store: StoreConfiguration(path: device.documents + "/m.sqlite", migrator: migrator)),
            keys: device.keys)
        dataController.launch(LaunchOptions())
        await waitForPhase(dataController) { $0 == .ready }
        let coordinator = try #require(dataController.coordinator)
        // The second message of thread 1 breaks the CHECK: its insert is undone with it, the others commit.
        let batch = [Message(id: 1, body: "a", thread: 1), Message(id: 2, body: "b", thread: 1),
                     Message(id: 3, body: "c", thread: 2)]
        // snippet.readme-savepoints
        let rejected = try await coordinator.write { db in
            var rejected: [Int64] = []
            for message in batch {
                do {
                    try db.inSavepoint {
                        try db.execute("INSERT INTO message (id, body) VALUES (?, ?)", [message.id, message.body])
                        try db.execute("UPDATE thread SET unread = unread + 1 WHERE id = ?", [message.thread])
                    }
                } catch let error as StoreError where error.code == .constraint {
                    rejected.append(message.id)  // this message's rows are gone; the others stay
                }
            }
            return rejected
        }
        // snippet.end
        #expect(rejected == [2])
        let (messages, unread) = try await coordinator.read { db in
            (try db.fetchValues(Int64.self, "SELECT id FROM message ORDER BY id"),
             try db.fetchValues(Int64.self, "SELECT unread FROM thread ORDER BY id"))
        }
        #expect(messages == [1, 3])
        #expect(unread == [1, 1])
        await dataController.terminate()
    }
}
