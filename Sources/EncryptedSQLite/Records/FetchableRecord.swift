/// A `Decodable` record read from its table.
///
/// It reads every row, one row by its key, or the rows one at a time.
///
/// The rows decode as ``Database/fetchAll(_:_:_:)`` decodes them: each coding key names a column, a column
/// that is not a number, text, blob, `Date`, `UUID` or `Bool` property is JSON text. GRDB's
/// `FetchableRecord`, for `Decodable` types only:
///
/// ```swift
/// let players = try Player.fetchAll(db)
/// let arthur = try Player.fetchOne(db, key: "1")        // nil when no row has that key
/// let cursor = try Player.fetchCursor(db)              // one row at a time, in this read
/// while let player = try cursor.next() { … }
/// ```
///
/// Queries beyond the whole table and one key are SQL: `db.fetchAll(Player.self, "SELECT * FROM player
/// WHERE score > ?", [100])`.
public protocol FetchableRecord: TableRecord, Decodable {}

extension FetchableRecord {
    /// Every row of the table, decoded (`SELECT * FROM table`, in the table's order).
    ///
    /// - Parameter database: the connection, inside a store's `read` or `write`.
    /// - Throws: the query's `StoreError`; `StoreError.Code.misuse` naming the column when a row does
    ///   not decode.
    public static func fetchAll(_ database: Database) throws -> [Self] {
        try database.fetchAll(Self.self, "SELECT * FROM \(quotedTableAndKey.table)")
    }

    /// The row whose primary key (``TableRecord/databasePrimaryKey``) is `key`, decoded.
    ///
    /// `nil` when there is none.
    ///
    /// - Parameters:
    ///   - database: the connection, inside a store's `read` or `write`.
    ///   - key: the primary key's value.
    /// - Throws: as ``fetchAll(_:)``.
    public static func fetchOne(_ database: Database, key: some DatabaseValueConvertible) throws -> Self? {
        let (table, column) = quotedTableAndKey
        return try database.fetchOne(Self.self, "SELECT * FROM \(table) WHERE \(column) = ?", StatementArguments(values: [key.databaseValue]))
    }

    /// A cursor over every row of the table, decoded one at a time as it is read.
    ///
    /// Memory stays that of one row however large the table (see ``DatabaseCursor``).
    ///
    /// - Parameter database: the connection; the cursor works only inside the `read` or `write` that opened it.
    /// - Throws: the query's `StoreError`.
    public static func fetchCursor(_ database: Database) throws -> DatabaseCursor<Self> {
        try database.fetchCursor(Self.self, "SELECT * FROM \(quotedTableAndKey.table)")
    }
}
