/// An `Encodable` record written to its table.
///
/// It can be inserted, updated by primary key, saved (update or insert) and deleted, and asked whether its row
/// exists.
///
/// The columns are the record's stored properties, encoded as ``Database/insert(_:into:onConflict:)`` encodes
/// them (a `nil` optional is `NULL`, a property that is not a column type is JSON text); the row is found by
/// the column ``TableRecord/databasePrimaryKey`` names. GRDB's `PersistableRecord`, for `Encodable` types only:
///
/// ```swift
/// var player = Player(id: "1", name: "Arthur", score: 100)
/// try player.insert(db)
/// player.score = 200
/// try player.update(db)                  // record-not-found when no row has its key
/// try player.save(db)                    // updates, or inserts when no row has its key
/// let deleted = try player.delete(db)    // whether a row was deleted
/// try Player.deleteOne(db, key: "1")     // by key
/// ```
///
/// A record whose key SQLite chooses (an `INTEGER PRIMARY KEY`, an `Int64?` property that is `nil`) learns it in
/// ``didInsert(rowID:)``, and ``inserted(_:onConflict:)`` gives back the record with it, as GRDB's `inserted`:
///
/// ```swift
/// struct Player: Codable, FetchableRecord, PersistableRecord {
///     var id: Int64?
///     var name: String
///     mutating func didInsert(rowID: Int64) { id = rowID }
/// }
/// // arthur.id is the new row's
/// let arthur = try Player(id: nil, name: "Arthur").inserted(db)
/// ```
///
/// Each method prepares its statement once per type and reuses it (the connection's statement cache).
public protocol PersistableRecord: TableRecord, Encodable {
    /// Called by ``inserted(_:onConflict:)`` once the record's row is inserted, with the row's rowid.
    ///
    /// The rowid is its `INTEGER PRIMARY KEY` when the table has one, so the record can keep the key SQLite
    /// chose. Does nothing by default.
    ///
    /// - Parameter rowID: the new row's rowid.
    mutating func didInsert(rowID: Int64)
}

extension PersistableRecord {
    /// Does nothing.
    ///
    /// A record whose key it sets itself needs nothing from the insert.
    ///
    /// - Parameter rowID: the new row's rowid.
    public mutating func didInsert(rowID: Int64) {}

    /// Inserts the record as a new row and returns it as ``didInsert(rowID:)`` updated it.
    ///
    /// The record returned has the key SQLite chose, for a record that keeps it.
    ///
    /// - Parameters:
    ///   - database: the connection, inside a store's `write`.
    ///   - conflict: what to do when a row with the same key exists: fail (the default), replace it, or skip
    ///     (then nothing was inserted and the record comes back unchanged).
    /// - Returns: the record, with what ``didInsert(rowID:)`` set.
    /// - Throws: as ``insert(_:onConflict:)``.
    public func inserted(_ database: Database, onConflict conflict: Database.ConflictResolution = .abort) throws -> Self {
        var record = self
        let rowID = try insert(database, onConflict: conflict)
        if database.changes > 0 { record.didInsert(rowID: rowID) }
        return record
    }

    /// Inserts the record as a new row.
    ///
    /// - Parameters:
    ///   - database: the connection, inside a store's `write`.
    ///   - conflict: what to do when a row with the same key exists: fail (the default), replace it, or skip.
    /// - Returns: the new row's rowid — its `INTEGER PRIMARY KEY` when the table has one, so a record whose
    ///   `Int64?` key was `nil` learns the key SQLite gave it.
    /// - Throws: `StoreError.Code.constraint` for a duplicate key (with ``Database/ConflictResolution/abort``)
    ///   or a `NOT NULL`, `CHECK` or foreign-key violation; `StoreError.Code.misuse` when the record does
    ///   not encode as columns.
    @discardableResult
    public func insert(_ database: Database, onConflict conflict: Database.ConflictResolution = .abort) throws -> Int64 {
        try database.insert(self, into: Self.databaseTableName, onConflict: conflict)
    }

    /// Updates the row that has the record's primary key.
    ///
    /// Every other column is set from the record.
    ///
    /// - Parameter database: the connection, inside a store's `write`.
    /// - Throws: `StoreError.Code.recordNotFound` when no row has the record's key (nothing was written; use
    ///   ``save(_:)`` to insert it then); `StoreError.Code.misuse` when the record has no property for its
    ///   key; the statement's `StoreError` (`StoreError.Code.constraint`).
    public func update(_ database: Database) throws {
        guard try updateIfPresent(database) else {
            throw StoreError(
                code: .recordNotFound,
                message: "no row of `\(Self.databaseTableName)` has this \(Self.self)'s primary key (`\(Self.databasePrimaryKey)`), so there is nothing to update; insert it, or use save",
                path: database.path)
        }
    }

    /// Updates the row that has the record's primary key, or inserts the record when there is none (or its key
    /// is `NULL`, for SQLite to choose).
    ///
    /// Not `INSERT OR REPLACE`, which deletes the old row first and so fires `ON DELETE` foreign-key actions.
    ///
    /// - Parameter database: the connection, inside a store's `write`.
    /// - Throws: as ``update(_:)`` and ``insert(_:onConflict:)``, except that a missing row is inserted.
    public func save(_ database: Database) throws {
        if try !updateIfPresent(database) { try insert(database) }
    }

    /// Deletes the row that has the record's primary key.
    ///
    /// - Parameter database: the connection, inside a store's `write`.
    /// - Returns: whether a row was deleted (`false` when none had the key).
    /// - Throws: `StoreError.Code.misuse` when the record has no property for its key; the statement's
    ///   `StoreError` (`StoreError.Code.constraint` when a foreign key still points at the row).
    @discardableResult
    public func delete(_ database: Database) throws -> Bool {
        let (table, key) = Self.quotedTableAndKey
        try database.execute("DELETE FROM \(table) WHERE \(key) = ?", [try primaryKeyValue()])
        return database.changes > 0
    }

    /// Whether a row has the record's primary key (whatever its other columns hold).
    ///
    /// - Parameter database: the connection, inside a store's `read` or `write`.
    /// - Throws: `StoreError.Code.misuse` when the record has no property for its key; the query's
    ///   `StoreError`.
    public func exists(_ database: Database) throws -> Bool {
        let (table, key) = Self.quotedTableAndKey
        let value = try primaryKeyValue()
        return try database.fetchValue(Bool.self, "SELECT EXISTS (SELECT 1 FROM \(table) WHERE \(key) = ?)", StatementArguments(values: [value])) ?? false
    }

    /// Runs `UPDATE … WHERE key = ?` and says whether a row was updated.
    ///
    /// A `NULL` key matches no row.
    private func updateIfPresent(_ database: Database) throws -> Bool {
        let columns = try RecordEncoder.columns(of: self)
        let keyValue = try Self.primaryKeyValue(in: columns)
        if keyValue == .null { return false }
        let others = columns.filter { $0.name != Self.databasePrimaryKey }
        // Only a key: nothing to set, but the row must exist for the update to have happened.
        guard !others.isEmpty else { return try exists(database) }
        let (table, key) = Self.quotedTableAndKey
        let assignments = others.map { "\(Database.quote($0.name)) = ?" }.joined(separator: ", ")
        try database.execute("UPDATE \(table) SET \(assignments) WHERE \(key) = ?", others.map(\.value) + [keyValue])
        return database.changes > 0
    }

    /// The value of the primary key's property.
    private func primaryKeyValue() throws -> DatabaseValue {
        try Self.primaryKeyValue(in: RecordEncoder.columns(of: self))
    }

    private static func primaryKeyValue(in columns: [(name: String, value: DatabaseValue)]) throws -> DatabaseValue {
        guard let value = columns.first(where: { $0.name == databasePrimaryKey })?.value else {
            throw StoreError(
                code: .misuse,
                message: "\(Self.self) has no stored property `\(databasePrimaryKey)` for the primary key of `\(databaseTableName)`; name its key column with `static let databasePrimaryKey`")
        }
        return value
    }
}
