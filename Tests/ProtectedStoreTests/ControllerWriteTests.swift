import Foundation
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// The controller's `write` shortcut, and a migrator that does not start from `DatabaseMigrator.keyValue`: the
/// common path of an app's data layer as short as GRDB's.
@Suite("The controller's write, and the key-value table whatever the migrator", .timeLimit(.minutes(3)))
@MainActor
struct ControllerWriteTests {
    @Test("the controller's write waits for the deferred setup before the first unlock, runs once, and returns its result")
    func writeWaitsForReady() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        #expect(fixture.controller.phase == .waitingForProtectedData)
        let controller = fixture.controller
        let write = Task { @MainActor in
            try await controller.write { db in
                try db.execute("INSERT INTO entries(key, value) VALUES ('k', 'v')")
                return db.changes
            }
        }
        await fixture.controller.waitUntilIdle()
        #expect(fixture.controller.queuedOperationCount == 1, "the write waits in the queue, as perform does")
        try await fixture.unlock()
        #expect(try await write.value == 1)
        #expect(try await controller.read { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") } == 1)
        await controller.terminate()
    }

    @Test("a statement that fails in the controller's write rolls the whole write back and throws its StoreError")
    func failedWriteRollsBack() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let error = await #expect(throws: StoreError.self) {
            try await fixture.controller.write("two rows") { db in
                try db.execute("INSERT INTO entries(key, value) VALUES ('k', 'v')")
                try db.execute("INSERT INTO entries(key, value) VALUES ('k', 'again')")
            }
        }
        #expect(error?.code == .constraint)
        #expect(try await fixture.controller.read { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") } == 0)
        await fixture.controller.terminate()
    }

    @Test("with a migrator that does not start from keyValue, an inbox put is merged, not quarantined, and put works")
    func keyValueTableWhateverTheMigrator() async throws {
        let fixture = try ControllerFixture()
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create player") { db in
            try db.execute("CREATE TABLE player(id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        }
        fixture.migrator = migrator
        fixture.controller = fixture.makeController()
        await fixture.launch()
        let controller = fixture.controller
        let coordinator = try #require(controller.coordinator)
        try controller.appendToInbox(.put(key: "from-the-inbox", value: "merged"))
        await controller.waitUntilIdle()
        _ = try await coordinator.mergeInbox()
        #expect(try await coordinator.quarantinedInboxRecords().isEmpty)
        #expect(try await coordinator.value(forKey: "from-the-inbox") == "merged")
        try await coordinator.put("k", "v")
        let applied = try await controller.read { try DatabaseMigrator().appliedMigrations(in: $0) }
        #expect(applied.sorted() == [DatabaseMigrator.keyValueMigrationIdentifier, "create player"].sorted())
        await controller.terminate()
    }
}
