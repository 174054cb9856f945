import Foundation
import SecureKeys
import Synchronization
import Testing

@_spi(Testing) @testable import ProtectedStore

/// A store's writer and readers get the same connection set-up: foreign keys on, the app's own preparation.
@Suite("Store connection set-up")
@MainActor
struct StoreConnectionSetupTests {
    @Test("a store enforces foreign keys in writes and migrations; prepareDatabase runs on the writer and each reader")
    func foreignKeysAndPreparationInAStore() async throws {
        let fixture = try ControllerFixture()
        fixture.migrator.registerMigration("parents and children") { db in
            try db.execute("CREATE TABLE parent(id INTEGER PRIMARY KEY)")
            try db.execute("CREATE TABLE child(id INTEGER PRIMARY KEY, parent INTEGER NOT NULL REFERENCES parent(id))")
        }
        let prepared = Mutex(0)
        fixture.database.prepareDatabase { db in
            prepared.withLock { $0 += 1 }
            try db.execute("PRAGMA recursive_triggers = ON")
        }
        fixture.controller = fixture.makeController()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        var failure: (any Error)?
        do {
            try await coordinator.write { db in try db.execute("INSERT INTO child(id, parent) VALUES (1, 42)") }
        } catch {
            failure = error
        }
        let constraint = failure as? StoreError
        #expect(constraint?.code == .constraint)
        #expect(constraint?.extendedResultCode == 787, "a dangling child must fail with SQLITE_CONSTRAINT_FOREIGNKEY: \(String(describing: failure))")
        #expect(try await coordinator.read { try $0.fetchValues(Int.self, "SELECT count(*) FROM child") } == [0])
        #expect(try await coordinator.read { try $0.fetchValues(Int.self, "PRAGMA recursive_triggers") } == [1])
        #expect(prepared.withLock { $0 } >= 2, "the writer and at least one reader were prepared")
    }
}
