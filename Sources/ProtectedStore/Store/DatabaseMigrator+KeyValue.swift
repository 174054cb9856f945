public import EncryptedSQLite

extension DatabaseMigrator {
    /// The identifier of the migration that creates the key-value table.
    public static let keyValueMigrationIdentifier = "key-value entries"

    /// One migration, which makes the key-value table `entries(key TEXT PRIMARY KEY, value TEXT)`.
    ///
    /// The coordinator's `put`/`value(forKey:)`, the inbox's ``InboxHandlers/keyValue`` handlers and the
    /// command-line tool use it.
    ///
    /// The default of ``StoreConfiguration/migrator``. The coordinator applies it first whatever migrator the
    /// app gives, so an app may start from `DatabaseMigrator()` as well as from this:
    ///
    /// ```swift
    /// var migrator = DatabaseMigrator.keyValue
    /// migrator.registerMigration("create notes") { db in
    ///     try db.execute("CREATE TABLE notes(…)")
    /// }
    /// ```
    ///
    /// It uses `CREATE TABLE IF NOT EXISTS`, so a store made before migrations existed (whose `entries` table
    /// was created at every attach) takes it as its first migration unchanged.
    public static var keyValue: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(keyValueMigrationIdentifier) { database in
            try database.execute("CREATE TABLE IF NOT EXISTS entries(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)")
        }
        return migrator
    }

    /// This migrator with the key-value migration (``keyValue``) first when it does not register it.
    ///
    /// The coordinator applies it at attach, so the `entries` table that `put`, `value(forKey:)` and the locked
    /// inbox's key-value records (``InboxHandlers/keyValue``) write is there whatever migrator the app started
    /// from. A store attached before without it takes it at its next attach (it creates the table only if
    /// missing).
    var includingKeyValue: DatabaseMigrator { addingMissing(first: .keyValue) }
}
