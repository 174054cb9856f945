import Foundation
import SecureKeys
import Synchronization
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// An app catches one error type, `StoreError`, inside a `write { }` closure and outside it, with SQLite's
/// codes on it (issue 27, item 8).
@Suite("One error type, inside and outside a closure")
@MainActor
struct OneErrorTypeTests {
    /// A store with a parent and a child table (foreign keys are on in every connection).
    func readyFixture() async throws -> ControllerFixture {
        let fixture = try ControllerFixture()
        fixture.migrator.registerMigration("parents and children") { db in
            try db.execute("CREATE TABLE parent(id INTEGER PRIMARY KEY, name TEXT UNIQUE)")
            try db.execute("CREATE TABLE child(id INTEGER PRIMARY KEY, parent INTEGER NOT NULL REFERENCES parent(id))")
        }
        fixture.controller = fixture.makeController()
        await fixture.launch()
        return fixture
    }

    @Test("a foreign-key violation is a StoreError with constraint and 787 inside write { }, and the same outside write and perform")
    func constraintInsideAndOutsideWrite() async throws {
        let fixture = try await readyFixture()
        let coordinator = try #require(fixture.controller.coordinator)
        let inside = Mutex<(any Error)?>(nil)
        let outside = await #expect(throws: StoreError.self) {
            try await coordinator.write { db in
                do {
                    try db.execute("INSERT INTO child(id, parent) VALUES (1, 42)")
                } catch {
                    inside.withLock { $0 = error }
                    throw error
                }
            }
        }
        let caughtInside = try #require(inside.withLock { $0 } as? StoreError, "inside write the statement threw \(String(describing: inside.withLock { $0 }))")
        #expect(caughtInside.code == .constraint)
        #expect(caughtInside.resultCode == 19)  // SQLITE_CONSTRAINT
        #expect(caughtInside.extendedResultCode == 787)  // SQLITE_CONSTRAINT_FOREIGNKEY
        #expect(caughtInside.sql == "INSERT INTO child(id, parent) VALUES (1, 42)")
        #expect(outside?.code == .constraint && outside?.extendedResultCode == 787)
        #expect(outside?.location == caughtInside.location, "the error left write as it was thrown, not wrapped")

        // Through the operation queue: `perform` rethrows the closure's error, still the one type.
        let performed = await #expect(throws: StoreError.self) {
            try await fixture.controller.perform("a duplicate name") { coordinator in
                try await coordinator.write { db in
                    try db.execute("INSERT INTO parent(id, name) VALUES (1, 'a')")
                    try db.execute("INSERT INTO parent(id, name) VALUES (2, 'a')")
                }
            }
        }
        #expect(performed?.code == .constraint)
        #expect(performed?.extendedResultCode == 2067)  // SQLITE_CONSTRAINT_UNIQUE
        #expect(try await coordinator.read { try $0.fetchValues(Int.self, "SELECT count(*) FROM parent") } == [0], "rolled back")
    }

    @Test("a statement that fails in a read is a StoreError with SQLite's code, as in a write")
    func readFailureIsAStoreError() async throws {
        let fixture = try await readyFixture()
        let coordinator = try #require(fixture.controller.coordinator)
        let error = await #expect(throws: StoreError.self) {
            try await coordinator.read { try $0.fetchValues(Int.self, "SELECT x FROM no_such_table") }
        }
        #expect(error?.code == .sqliteError)
        #expect(error?.resultCode == 1)  // SQLITE_ERROR
        #expect(error?.message.contains("no such table") == true)
    }

    @Test("a wrong key at Database(path:key:) is a StoreError with wrong-key, naming the file")
    func wrongKeyIsAStoreError() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("store.sqlite")
        let database = try Database(path: path, key: try SecureBytes.random(count: 32))
        try database.execute("CREATE TABLE t(x)")
        database.close()
        let error = #expect(throws: StoreError.self) {
            _ = try Database(path: path, key: try SecureBytes.random(count: 32))
        }
        #expect(error?.code == .wrongKey)
        #expect(error?.resultCode == 26)  // SQLITE_NOTADB
        #expect(error?.path == path)
        #expect(error.map { "\($0)".hasPrefix("wrong-key: ") } == true)
    }
}
