/// A type whose values are the rows of one table.
///
/// It gives the table's name and its primary key, and what needs nothing more, which is counting and deleting the
/// rows.
///
/// Adopted through ``FetchableRecord`` (reading) and ``PersistableRecord`` (writing), as GRDB's
/// `TableRecord`. The defaults fit a table named after the type, keyed by an `id` column:
///
/// ```swift
/// // table "player", key "id"
/// struct Player: Codable, FetchableRecord, PersistableRecord {
///     var id: String
///     var name: String
///     var score: Int
/// }
/// ```
public protocol TableRecord {
    /// The table's name.
    ///
    /// By default it is the type's name with its leading capitals lowercased, as GRDB does: `Player` → `player`,
    /// `HTTPRequest` → `httpRequest`.
    static var databaseTableName: String { get }

    /// The primary key's column, also the name of the property that holds it. `id` by default.
    ///
    /// One column: the key of ``FetchableRecord/fetchOne(_:key:)`` and of the `WHERE` clause of
    /// ``PersistableRecord/update(_:)``, ``PersistableRecord/delete(_:)`` and ``PersistableRecord/exists(_:)``.
    /// A table whose key spans several columns is read and written with SQL (``Database/fetchAll(_:_:_:)``,
    /// ``Database/execute(_:_:)-(_,StatementArguments)``).
    static var databasePrimaryKey: String { get }
}

extension TableRecord {
    /// The type's name with its leading capitals lowercased (`Player` → `player`, `HTTPRequest` →
    /// `httpRequest`, `URL` → `url`).
    public static var databaseTableName: String { defaultTableName(for: String(describing: Self.self)) }

    /// `id`.
    public static var databasePrimaryKey: String { "id" }

    /// The number of rows in the table (`SELECT count(*)`).
    ///
    /// - Parameter database: the connection, inside a store's `read` or `write`.
    /// - Throws: the query's `StoreError` (`StoreError.Code.sqliteError` with "no such table" when the table
    ///   does not exist).
    public static func fetchCount(_ database: Database) throws -> Int {
        try database.fetchValue(Int.self, "SELECT count(*) FROM \(Database.quote(databaseTableName))") ?? 0
    }

    /// Deletes every row of the table.
    ///
    /// - Parameter database: the connection, inside a store's `write`.
    /// - Returns: how many rows were deleted.
    /// - Throws: the statement's `StoreError` (`StoreError.Code.constraint` when a foreign key still
    ///   points at a row).
    @discardableResult
    public static func deleteAll(_ database: Database) throws -> Int {
        try database.execute("DELETE FROM \(Database.quote(databaseTableName))", [DatabaseValue]())
        return database.changes
    }

    /// Deletes the row whose primary key (``databasePrimaryKey``) is `key`.
    ///
    /// - Parameters:
    ///   - database: the connection, inside a store's `write`.
    ///   - key: the primary key's value.
    /// - Returns: whether a row was deleted (`false` when none had the key).
    /// - Throws: the statement's `StoreError` (`StoreError.Code.constraint` when a foreign key still points
    ///   at the row).
    @discardableResult
    public static func deleteOne(_ database: Database, key: some DatabaseValueConvertible) throws -> Bool {
        let (table, column) = quotedTableAndKey
        try database.execute("DELETE FROM \(table) WHERE \(column) = ?", [key.databaseValue])
        return database.changes > 0
    }

    /// The table's name and its key column, quoted for SQL.
    static var quotedTableAndKey: (table: String, key: String) {
        (Database.quote(databaseTableName), Database.quote(databasePrimaryKey))
    }
}

/// `typeName` with its leading run of capitals lowercased.
///
/// It keeps the last capital of a run that starts a word, so `HTTPRequest` becomes `httpRequest`.
func defaultTableName(for typeName: String) -> String {
    let characters = Array(typeName)
    let leadingCapitals = characters.prefix { $0.isUppercase }.count
    guard leadingCapitals > 0 else { return typeName }
    // In "HTTPRequest" the "R" begins the next word: it stays a capital.
    let lowered = leadingCapitals > 1 && leadingCapitals < characters.count ? leadingCapitals - 1 : leadingCapitals
    return characters.prefix(lowered).map { $0.lowercased() }.joined() + String(characters.dropFirst(lowered))
}
