import Foundation
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

@Suite("Migrations at attach", .timeLimit(.minutes(3)))
@MainActor
struct MigrationAttachTests {
    struct Broken: Error {}

    static func migrator(_ names: [String], failing: String? = nil) -> DatabaseMigrator {
        var migrator = DatabaseMigrator.keyValue
        for name in names {
            migrator.registerMigration(name) { database in
                try database.execute("CREATE TABLE \"\(name)\"(x)")
                if name == failing { throw Broken() }
            }
        }
        return migrator
    }

    func relaunch(_ fixture: ControllerFixture, with migrator: DatabaseMigrator) async {
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        fixture.migrator = migrator
        fixture.controller = fixture.makeController()
        await fixture.launch()
    }

    func tables(_ fixture: ControllerFixture) async throws -> [String] {
        try await fixture.controller.perform("tables") { coordinator in
            try await coordinator.read {
                try $0.fetchValues(String.self, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            }
        }
    }

    @Test("a failing migration fails the attach with migration-failed, presented; the store stays at the last good one")
    func failingMigrationLeavesLastGood() async throws {
        let fixture = try ControllerFixture()
        fixture.migrator = Self.migrator(["one", "two"], failing: "two")
        fixture.controller = fixture.makeController()
        await fixture.launch()
        guard case .failed(let error) = fixture.controller.phase else {
            Issue.record("the attach did not fail: \(fixture.controller.phase)")
            return
        }
        #expect(error.code == .migrationFailed)
        #expect(error.message.contains("migration `two` failed"))
        #expect(error.cause is Broken)
        #expect(fixture.presented.map(\.code) == [.migrationFailed], "data was available: the error is presented, once")

        // The same app without the broken migration: the store is at "one", and nothing of "two" is left.
        await relaunch(fixture, with: Self.migrator(["one"]))
        #expect(fixture.controller.phase == .ready)
        #expect(try await tables(fixture) == ["entries", "one", "store_migrations"])
        // The fixed app applies "two" now.
        await relaunch(fixture, with: Self.migrator(["one", "two"]))
        #expect(try await tables(fixture) == ["entries", "one", "store_migrations", "two"])
    }

    @Test("a store written by a newer app is refused with store-from-newer-app and not modified")
    func newerStoreIsRefusedUnchanged() async throws {
        let fixture = try ControllerFixture()
        fixture.migrator = Self.migrator(["one", "two"])
        fixture.controller = fixture.makeController()
        await fixture.launch()
        try await fixture.controller.coordinator?.put("k", "v")
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        let files = [fixture.storePath, fixture.storePath + "-wal"]
        let before = files.map(fileBytes)

        await relaunch(fixture, with: Self.migrator(["one"]))
        guard case .failed(let error) = fixture.controller.phase else {
            Issue.record("an older app attached a newer store: \(fixture.controller.phase)")
            return
        }
        #expect(error.code == .storeFromNewerApp)
        #expect(error.message.contains("`two`"))
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        #expect(files.map(fileBytes) == before, "the store's files are byte for byte as they were")
    }

    @Test("migrations run before the inbox merge: a record written for the new schema while locked is applied, not quarantined")
    func migrationsRunBeforeInboxMerge() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        try await fixture.rebootDevice()  // locked: not unlocked since boot

        // The updated app: a `starred` table made by a migration, and a handler that writes to it.
        var migrator = DatabaseMigrator.keyValue
        migrator.registerMigration("create starred") { try $0.execute("CREATE TABLE starred(note TEXT NOT NULL)") }
        fixture.migrator = migrator
        fixture.inboxHandlers = InboxHandlers.keyValue.handling(NoteStarred.self) { database, change in
            try database.execute("INSERT INTO starred(note) VALUES (?)", [change.note])
        }
        fixture.controller = fixture.makeController()
        await fixture.launch(LaunchOptions(reason: .location))
        #expect(fixture.controller.phase == .waitingForProtectedData)
        try fixture.controller.appendToInbox(NoteStarred(note: "groceries"))
        try await fixture.unlock()
        #expect(fixture.controller.phase == .ready)
        let starred = try await fixture.controller.perform("starred") { coordinator in
            try await coordinator.read { try $0.fetchValues(String.self, "SELECT note FROM starred") }
        }
        #expect(starred == ["groceries"])
        #expect(try await fixture.controller.perform("kept") { try await $0.quarantinedInboxRecords() }.isEmpty)
    }
}
