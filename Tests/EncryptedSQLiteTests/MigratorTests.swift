import TestSupport
import Foundation
import SecureKeys
import Testing

@testable import EncryptedSQLite

@Suite("Migrations")
struct MigratorTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }

    struct Broken: Error {}

    func open() throws -> Database { try Database(path: directory.file("store.sqlite"), key: key) }

    func tables(_ database: Database) throws -> [String] {
        try database.fetchValues(String.self, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
    }

    var twoMigrations: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("one") { try $0.execute("CREATE TABLE one(x)") }
        migrator.registerMigration("two") { try $0.execute("CREATE TABLE two(y)") }
        return migrator
    }

    @Test("migrations run in order, once each, and are recorded")
    func appliedInOrderOnce() throws {
        let database = try open()
        #expect(try twoMigrations.migrate(database) == ["one", "two"])
        #expect(try twoMigrations.migrate(database) == [])
        #expect(try twoMigrations.appliedMigrations(in: database) == ["one", "two"])
        var three = twoMigrations
        three.registerMigration("three") { try $0.execute("INSERT INTO one(x) VALUES (3)") }
        #expect(try three.migrate(database) == ["three"])
        #expect(try database.fetchValue(Int.self, "SELECT count(*) FROM one") == 1)
    }

    @Test("a failed migration is rolled back: the store stays at the last good one, and the error names it")
    func failedMigrationLeavesLastGood() throws {
        let database = try open()
        var migrator = twoMigrations
        migrator.registerMigration("three") { database in
            try database.execute("CREATE TABLE three(z)")
            try database.execute("INSERT INTO one(x) VALUES (1)")
            throw Broken()
        }
        do {
            try migrator.migrate(database)
            Issue.record("the failing migration did not throw")
        } catch let error as StoreError {
            #expect(error.code == .migrationFailed)
            #expect(error.message.contains("migration `three` failed"))
            #expect(error.cause is Broken)
            #expect(error.message.contains("stays at two"))
        }
        #expect(try migrator.appliedMigrations(in: database) == ["one", "two"])
        #expect(try tables(database) == ["one", DatabaseMigrator.tableName, "two"])
        #expect(try database.fetchValue(Int.self, "SELECT count(*) FROM one") == 0)
        #expect(!database.isInTransaction)
    }

    @Test("a failed migration's error names it in its migration property, not only in its message")
    func failedMigrationNamedOnTheError() throws {
        let database = try open()
        var migrator = twoMigrations
        migrator.registerMigration("three") { _ in throw Broken() }
        let error = #expect(throws: StoreError.self) { try migrator.migrate(database) }
        #expect(error?.code == .migrationFailed)
        #expect(error?.migration == "three")
        // A migration's SQL that fails is named the same way.
        var failingSQL = twoMigrations
        failingSQL.registerMigration("bad sql") { try $0.execute("INSERT INTO missing VALUES (1)") }
        let sqlError = #expect(throws: StoreError.self) { try failingSQL.migrate(database) }
        #expect(sqlError?.migration == "bad sql")
        // Only a migration's error names one.
        #expect(StoreError(code: .misuse, message: "m").migration == nil)
    }

    @Test("a store from a newer app (an unknown migration recorded) is refused before anything changes")
    func newerStoreRefused() throws {
        let database = try open()
        var newer = twoMigrations
        newer.registerMigration("from the future") { try $0.execute("CREATE TABLE future(x)") }
        try newer.migrate(database)
        var older = DatabaseMigrator()
        older.registerMigration("one") { try $0.execute("CREATE TABLE one(x)") }
        older.registerMigration("older only") { try $0.execute("CREATE TABLE older(x)") }
        do {
            try older.migrate(database)
            Issue.record("an older migrator migrated a newer store")
        } catch let error as StoreError {
            #expect(error.code == .storeFromNewerApp)
            #expect(error.message.contains("`two`"))
        }
        #expect(try tables(database) == ["future", "one", DatabaseMigrator.tableName, "two"], "nothing was created")
    }

    @Test("migrations in one transaction (a store's creation) are all applied and recorded, or none: a failing one rolls back those before it, and the error names it")
    func oneTransactionIsAllOrNothing() throws {
        let database = try open()
        #expect(try twoMigrations.migrate(database, inOneTransaction: true) == ["one", "two"])
        #expect(try twoMigrations.appliedMigrations(in: database) == ["one", "two"])
        #expect(try twoMigrations.migrate(database, inOneTransaction: true) == [])

        let other = try Database(path: directory.file("other.sqlite"), key: key)
        var migrator = twoMigrations
        migrator.registerMigration("three") { _ in throw Broken() }
        let error = #expect(throws: StoreError.self) { try migrator.migrate(other, inOneTransaction: true) }
        #expect(error?.code == .migrationFailed)
        #expect(error?.migration == "three")
        #expect(error?.message.contains("stays at no migration") == true, "\(error?.message ?? "")")
        #expect(try tables(other) == [], "one and two were rolled back with three")
        #expect(!other.isInTransaction)
    }

    @Test("a new file built without a journal on disk is in WAL mode after finishBuilding, with every page, and its log open; a connection that builds nothing cannot finish")
    func builtFileFinishesInWALMode() throws {
        var configuration = Database.Configuration()
        configuration.buildsNewFile = true
        let path = directory.file("built.sqlite")
        let database = try Database(path: path, key: key, configuration: configuration)
        #expect(try database.scalar("PRAGMA journal_mode")?.string == "memory")
        #expect(try database.scalar("PRAGMA synchronous")?.int64 == 0)
        #expect(try twoMigrations.migrate(database, inOneTransaction: true) == ["one", "two"])
        #expect(!FileManager.default.fileExists(atPath: path + "-journal"), "the journal is in memory")
        try database.finishBuilding()
        #expect(try database.scalar("PRAGMA journal_mode")?.string == "wal")
        #expect(try database.scalar("PRAGMA synchronous")?.int64 == 2, "FULL, the configured level")
        #expect(FileManager.default.fileExists(atPath: path + "-wal"), "the log is open")
        database.close()
        let reopened = try Database(path: path, key: key)
        #expect(try twoMigrations.appliedMigrations(in: reopened) == ["one", "two"])
        #expect(throws: StoreError.self) { try reopened.finishBuilding() }
        reopened.close()
        // Only a new file is built so: an existing one is refused.
        #expect(throws: StoreError.self) { _ = try Database(path: path, key: key, configuration: configuration) }
    }
}
