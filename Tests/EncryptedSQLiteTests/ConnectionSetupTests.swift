import TestSupport
import Foundation
import SecureKeys
import Synchronization
import Testing

@testable import EncryptedSQLite

/// What every connection gets when it opens: foreign keys enforced, and the app's own set-up.
@Suite("Connection set-up")
struct ConnectionSetupTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }
    var path: String { directory.file("store.sqlite") }

    func makeSchema(_ database: Database) throws {
        try database.execute("CREATE TABLE parent(id INTEGER PRIMARY KEY)")
        try database.execute("CREATE TABLE child(id INTEGER PRIMARY KEY, parent INTEGER NOT NULL REFERENCES parent(id))")
    }

    @Test("a row pointing at a missing parent fails with a constraint error, extended code 787, inside a transaction")
    func foreignKeysAreEnforcedInsideTransactions() throws {
        let database = try Database(path: path, key: key)
        try makeSchema(database)
        // Every write of a store runs in a transaction, where `PRAGMA foreign_keys = ON` would do nothing.
        #expect {
            try database.transaction { try database.execute("INSERT INTO child(id, parent) VALUES (1, 42)") }
        } throws: { error in
            let error = error as? StoreError
            return error?.code == .constraint && error?.extendedResultCode == 787
        }
        try database.transaction {
            try database.execute("INSERT INTO parent(id) VALUES (42)")
            try database.execute("INSERT INTO child(id, parent) VALUES (1, 42)")
        }
        #expect(try database.fetchValues(Int.self, "SELECT count(*) FROM child") == [1])
    }

    @Test("foreignKeysEnabled = false lets a dangling row in, as SQLite's default does")
    func foreignKeysCanBeTurnedOff() throws {
        var configuration = Database.Configuration()
        configuration.foreignKeysEnabled = false
        let database = try Database(path: path, key: key, configuration: configuration)
        try makeSchema(database)
        try database.transaction { try database.execute("INSERT INTO child(id, parent) VALUES (1, 42)") }
        #expect(try database.fetchValues(Int.self, "PRAGMA foreign_keys") == [0])
    }

    @Test("prepareDatabase runs on every connection that opens, in the order added, after the key is validated")
    func prepareDatabaseRunsOnEveryConnection() throws {
        let calls = Mutex<[String]>([])
        var configuration = Database.Configuration()
        configuration.prepareDatabase { db in
            calls.withLock { $0.append("first") }
            try db.execute("PRAGMA recursive_triggers = ON")
        }
        configuration.prepareDatabase { _ in calls.withLock { $0.append("second") } }
        let writer = try Database(path: path, key: key, configuration: configuration)
        var reading = configuration
        reading.readOnly = true
        let reader = try Database(path: path, key: key, configuration: reading)
        #expect(calls.withLock { $0 } == ["first", "second", "first", "second"])
        #expect(try writer.fetchValues(Int.self, "PRAGMA recursive_triggers") == [1])
        #expect(try reader.fetchValues(Int.self, "PRAGMA recursive_triggers") == [1])
    }

    @Test("an error thrown by prepareDatabase fails the open with that error, and the connection is closed")
    func prepareDatabaseErrorFailsTheOpen() throws {
        struct Refused: Error {}
        var configuration = Database.Configuration()
        configuration.prepareDatabase { _ in throw Refused() }
        #expect(throws: Refused.self) { try Database(path: path, key: key, configuration: configuration) }
    }
}
