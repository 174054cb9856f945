internal import Foundation

/// The schema's history: named migrations, applied in the order they were registered, each once, each in
/// its own transaction, and recorded in the database (table `store_migrations`).
///
/// ```swift
/// var migrator = DatabaseMigrator()
/// migrator.registerMigration("create notes") { db in
///     try db.execute("CREATE TABLE notes(id BLOB PRIMARY KEY NOT NULL, title TEXT NOT NULL, body TEXT NOT NULL)")
/// }
/// migrator.registerMigration("add notes.pinned") { db in
///     try db.execute("ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
/// }
/// ```
///
/// A migration that throws is rolled back, with its record: the database stays at the last migration that
/// succeeded, and ``migrate(_:)`` throws ``MigrationError/Code/migrationFailed`` naming it. A database that
/// records a migration this migrator does not know — written by a newer version of the app — is refused
/// with ``MigrationError/Code/newerDatabase`` before anything is changed. Never edit a migration that has
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
    /// - Throws: the read's ``SQLiteError``.
    public func appliedMigrations(in database: Database) throws -> [String] {
        let exists = try database.scalar(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?", [.text(Self.tableName)])
        guard exists?.int64 == 1 else { return [] }
        return try database.fetchValues(String.self, "SELECT identifier FROM \(Self.tableName) ORDER BY rowid")
    }

    /// Applies the migrations `database` has not applied yet, in order.
    ///
    /// - Returns: the identifiers of the migrations applied now.
    /// - Throws: a ``MigrationError``: ``MigrationError/Code/newerDatabase`` (nothing changed),
    ///   ``MigrationError/Code/migrationFailed`` (the migrations before the failed one stay applied; the
    ///   failure is the error's ``MigrationError/cause``).
    @discardableResult
    public func migrate(_ database: Database) throws -> [String] {
        let applied: [String]
        do {
            applied = try appliedMigrations(in: database)
        } catch {
            throw MigrationError(
                code: .migrationFailed, migration: nil,
                message: "the list of applied migrations could not be read", cause: error)
        }
        let known = Set(migrationIdentifiers)
        let unknown = applied.filter { !known.contains($0) }
        guard unknown.isEmpty else {
            throw MigrationError(
                code: .newerDatabase, migration: unknown.first,
                message: "the store records migrations this app does not know (\(unknown.map { "`\($0)`" }.joined(separator: ", "))): it was written by a newer version of the app, and is left unchanged")
        }
        let done = Set(applied)
        var appliedNow: [String] = []
        for migration in registered where !done.contains(migration.identifier) {
            do {
                try database.transaction(.immediate) {
                    try database.execute(
                        "CREATE TABLE IF NOT EXISTS \(Self.tableName)(identifier TEXT PRIMARY KEY NOT NULL, applied_at TEXT NOT NULL)")
                    try migration.migrate(database)
                    try database.execute(
                        "INSERT INTO \(Self.tableName)(identifier, applied_at) VALUES (?, ?)",
                        [migration.identifier, Date()] as StatementArguments)
                }
            } catch {
                throw MigrationError(
                    code: .migrationFailed, migration: migration.identifier,
                    message: "migration `\(migration.identifier)` failed and was rolled back; the store stays at \(appliedNow.last ?? applied.last ?? "no migration")",
                    cause: error)
            }
            appliedNow.append(migration.identifier)
        }
        return appliedNow
    }
}

/// Why ``DatabaseMigrator/migrate(_:)`` stopped.
public struct MigrationError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The short kebab-case word users see.
        public let name: String
        private init(_ name: String) { self.name = name }
        /// The name.
        public var description: String { name }

        /// A migration threw (or its transaction failed); it was rolled back.
        public static let migrationFailed = Code("migration-failed")
        /// The database records migrations this migrator does not know: a newer app wrote it.
        public static let newerDatabase = Code("store-from-newer-app")
    }

    /// What kind of failure this is.
    public var code: Code
    /// The migration that failed, or the first unknown one.
    public var migration: String?
    /// What happened, in a sentence.
    public var message: String
    /// The underlying failure (the migration's error, or SQLite's).
    public var cause: (any Error)?

    /// A migration failure.
    public init(code: Code, migration: String?, message: String, cause: (any Error)? = nil) {
        self.code = code
        self.migration = migration
        self.message = message
        self.cause = cause
    }

    /// The code, the message and the cause.
    public var description: String {
        "\(code.name): \(message)" + (cause.map { " (\(String(describing: $0)))" } ?? "")
    }
}
