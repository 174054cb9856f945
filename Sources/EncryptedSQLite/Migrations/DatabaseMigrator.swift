internal import Foundation

/// The schema's history, as named migrations.
///
/// They are applied in the order they were registered, each once, each in its own transaction, and recorded in
/// the database (table `store_migrations`).
///
/// ```swift
/// var migrator = DatabaseMigrator()
/// migrator.registerMigration("create notes") { db in
///     try db.execute("""
///         CREATE TABLE notes(
///             id BLOB PRIMARY KEY NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL)
///         """)
/// }
/// migrator.registerMigration("add notes.pinned") { db in
///     try db.execute("ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
/// }
/// ```
///
/// A migration that throws is rolled back, with its record: the database stays at the last migration that
/// succeeded, and ``migrate(_:)`` throws a `StoreError` with code `migrationFailed` naming it (its `migration`). A database that
/// records a migration this migrator does not know — written by a newer version of the app — is refused
/// with `storeFromNewerApp` before anything is changed. Never edit a migration that has
/// shipped: register a new one.
public struct DatabaseMigrator: Sendable {
    /// One registered migration.
    private struct Migration: Sendable {
        let identifier: String
        let migrate: @Sendable (Database) throws -> Void
    }

    /// The table that records applied migrations.
    public static let tableName = "store_migrations"

    private var registered: [Migration] = []

    /// A migrator with no migration.
    public init() {}

    /// The identifiers of the registered migrations, in order.
    public var migrationIdentifiers: [String] { registered.map(\.identifier) }

    /// This migrator with the migrations of `earlier` that it does not have registered before its own, in
    /// `earlier`'s order.
    ///
    /// - Parameter earlier: the migrations that come first.
    /// - Returns: the combined migrator.
    package func addingMissing(first earlier: DatabaseMigrator) -> DatabaseMigrator {
        let own = Set(migrationIdentifiers)
        var combined = DatabaseMigrator()
        combined.registered = earlier.registered.filter { !own.contains($0.identifier) } + registered
        return combined
    }

    /// Adds a migration after those registered before it.
    ///
    /// - Parameters:
    ///   - identifier: its name, unique and never reused; it is stored in the database.
    ///   - migrate: changes the schema (and data); runs inside the migration's transaction.
    /// - Precondition: no migration was registered under `identifier` (a programming error, like GRDB's).
    public mutating func registerMigration(_ identifier: String, migrate: @escaping @Sendable (Database) throws -> Void) {
        precondition(
            !registered.contains { $0.identifier == identifier }, "a migration named `\(identifier)` is already registered")
        registered.append(Migration(identifier: identifier, migrate: migrate))
    }

    /// The migrations `database` records as applied, in the order they were applied.
    ///
    /// - Throws: the read's `StoreError`.
    public func appliedMigrations(in database: Database) throws -> [String] {
        let exists = try database.scalar(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(Self.tableName)])
        guard exists?.int64 == 1 else { return [] }
        return try database.fetchValues(String.self, "SELECT identifier FROM \(Self.tableName) ORDER BY rowid")
    }

    /// Applies the migrations `database` has not applied yet, in order.
    ///
    /// - Returns: the identifiers of the migrations applied now.
    /// - Throws: a `StoreError`: `StoreError.Code.storeFromNewerApp` (nothing changed),
    ///   `StoreError.Code.migrationFailed` naming the migration in its `migration` (the migrations before it stay applied; its
    ///   failure is the error's `cause`). When the store itself failed under the migrations — a page that
    ///   fails its HMAC, a read or write the file system refused, a full disk, a read-only file — the error
    ///   says that (`storeDamaged`, `storeUnavailable`, `diskFull`, `readOnly`), with SQLite's extended
    ///   result code, and where the migrations found it.
    @discardableResult
    public func migrate(_ database: Database) throws -> [String] {
        try migrate(database, inOneTransaction: false)
    }

    /// Applies the migrations `database` has not applied yet, in order, each in a transaction of its own or
    /// all in one.
    ///
    /// All in one is for a store being created, which is there whole with every migration or not at all: a
    /// failure rolls every one back, and the statements each transaction repeats run once.
    ///
    /// - Returns: the identifiers of the migrations applied now.
    /// - Throws: as ``migrate(_:)``.
    @discardableResult
    package func migrate(_ database: Database, inOneTransaction: Bool) throws -> [String] {
        let applied: [String]
        do {
            applied = try appliedMigrations(in: database)
        } catch {
            throw Self.failure(
                migration: nil, message: "the list of applied migrations could not be read", cause: error)
        }
        let known = Set(migrationIdentifiers)
        let unknown = applied.filter { !known.contains($0) }
        guard unknown.isEmpty else {
            throw StoreError(
                code: .storeFromNewerApp,
                message: "the store records migrations this app does not know (\(unknown.map { "`\($0)`" }.joined(separator: ", "))): it was written by a newer version of the app, and is left unchanged")
        }
        let done = Set(applied)
        let pending = registered.filter { !done.contains($0.identifier) }
        guard !pending.isEmpty else { return [] }
        var appliedNow: [String] = []
        // The migration a failure of the transaction itself (its start, its commit) is named after.
        var current = pending[0].identifier
        /// Runs `migration` and records it, in the transaction under way.
        func apply(_ migration: Migration) throws {
            current = migration.identifier
            do {
                try migration.migrate(database)
                try database.execute(
                    "INSERT INTO \(Self.tableName)(identifier, applied_at) VALUES (?, ?)",
                    [migration.identifier, Date()] as StatementArguments)
            } catch {
                throw failure(of: migration.identifier, cause: error)
            }
            appliedNow.append(migration.identifier)
        }
        /// The error of `migration`, which was rolled back.
        func failure(of migration: String, cause: any Error) -> StoreError {
            let stays = inOneTransaction ? applied.last : appliedNow.last ?? applied.last
            return Self.failure(
                migration: migration,
                message: "migration `\(migration)` failed and was rolled back; the store stays at \(stays ?? "no migration")",
                cause: cause)
        }
        /// Runs `body` in an immediate transaction. A failure of the transaction itself (its start, its commit)
        /// is named after the migration it was for, as a failure of the migration is.
        func transaction(_ body: () throws -> Void) throws {
            do {
                try database.transaction(.immediate, body)
            } catch let error as StoreError where error.migration != nil {
                throw error
            } catch {
                throw failure(of: current, cause: error)
            }
        }
        let createTable = "CREATE TABLE IF NOT EXISTS \(Self.tableName)(identifier TEXT PRIMARY KEY NOT NULL, applied_at TEXT NOT NULL)"
        if inOneTransaction {
            try transaction {
                try database.execute(createTable)
                for migration in pending { try apply(migration) }
            }
            return appliedNow
        }
        for migration in pending {
            current = migration.identifier
            try transaction {
                try database.execute(createTable)
                try apply(migration)
            }
        }
        return appliedNow
    }
}

extension DatabaseMigrator {
    /// Why ``migrate(_:)`` stopped.
    ///
    /// The store's own failure under the migrations keeps its code, named where the migrations found it. Anything
    /// else is `migrationFailed`.
    ///
    /// - Parameters:
    ///   - migration: the migration that ran, or `nil` when the applied migrations were being read.
    ///   - message: what failed, for `migrationFailed`.
    ///   - cause: what the migration (or the read) threw.
    /// The error names `migration` in its ``StoreError/migration`` as well as in its message.
    static func failure(migration: String?, message: String, cause: any Error) -> StoreError {
        var error = storeFailure(migration: migration, cause: cause)
            ?? StoreError(code: .migrationFailed, message: message, cause: cause)
        error.migration = migration
        return error
    }

    /// The store's own failure under the migrations, named where they found it.
    ///
    /// `nil` for anything else.
    private static func storeFailure(migration: String?, cause: any Error) -> StoreError? {
        guard let storage = cause as? StoreError else { return nil }
        let code: StoreError.Code
        switch storage.code {
        // The database opened with its key, so a page that fails later is damage, not a wrong key.
        case .storeDamaged, .wrongKey: code = .storeDamaged
        case .storeUnavailable, .diskFull, .readOnly: code = storage.code
        default: return nil
        }
        let place = migration.map { "while migration `\($0)` ran (it was rolled back)" } ?? "while the applied migrations were read"
        let what = code == .storeDamaged ? "the store is damaged: " : ""
        return StoreError(
            code: code,
            message: "\(what)\(storage.detail) — found \(place); the store was left as it is, at its last good migration",
            path: nil, extendedResultCode: storage.extendedResultCode, cause: storage)
    }
}
