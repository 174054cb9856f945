/// Records, and single-column values.
///
/// Records are `Codable` types read from rows and written as rows.
///
/// ```swift
/// struct Note: Codable, Sendable {
///     var id: UUID
///     var title: String
///     var createdAt: Date
///     var tags: [String]          // not a column type: stored as JSON text
/// }
///
/// try database.insert(note, into: "notes")
/// let notes = try database.fetchAll(Note.self, "SELECT * FROM notes WHERE title LIKE ?", ["%swift%"])
/// let count = try database.fetchValue(Int.self, "SELECT count(*) FROM notes") ?? 0
/// ```
extension Database {
    /// What an insert does when it would break a `UNIQUE` or `PRIMARY KEY` constraint.
    public enum ConflictResolution: String, Sendable {
        /// Fail with `StoreError.Code.constraint` (SQLite's default).
        case abort = "ABORT"
        /// Replace the row that is in the way (`INSERT OR REPLACE`).
        ///
        /// This is an "insert or update" by key.
        case replace = "REPLACE"
        /// Keep the existing row and skip this one (`INSERT OR IGNORE`).
        case ignore = "IGNORE"
    }

    /// Every row of a query, decoded as `Record`.
    ///
    /// - Parameters:
    ///   - type: the record type; its coding keys name the columns (see `RowDecoder`).
    ///   - sql: one `SELECT`.
    ///   - arguments: its arguments.
    /// - Throws: the query's `StoreError`; `StoreError.Code.misuse` naming the column when a row does
    ///   not decode.
    public func fetchAll<Record: Decodable>(
        _ type: Record.Type, _ sql: String, _ arguments: StatementArguments = []
    ) throws -> [Record] {
        try rows(sql, arguments).map { try RowDecoder.decode(Record.self, from: $0) }
    }

    /// The first row of a query decoded as `Record`, or `nil` when there is none.
    ///
    /// - Throws: as ``fetchAll(_:_:_:)``.
    public func fetchOne<Record: Decodable>(
        _ type: Record.Type, _ sql: String, _ arguments: StatementArguments = []
    ) throws -> Record? {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        let names = statement.columnNames
        let row = Row(columnNames: names, values: names.indices.map(statement.value(at:)))
        return try RowDecoder.decode(Record.self, from: row)
    }

    /// The first column of every row, converted to `Value` (use an optional type for a column that may be
    /// `NULL`).
    ///
    /// - Throws: the query's `StoreError`; `StoreError.Code.misuse` when a value does not convert.
    public func fetchValues<Value: DatabaseValueConvertible>(
        _ type: Value.Type, _ sql: String, _ arguments: StatementArguments = []
    ) throws -> [Value] {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        var values: [Value] = []
        while try statement.step() { values.append(try statement.decode(Value.self, at: 0)) }
        return values
    }

    /// The first column of the first row converted to `Value`, or `nil` when there is no row.
    ///
    /// - Throws: as ``fetchValues(_:_:_:)``.
    public func fetchValue<Value: DatabaseValueConvertible>(
        _ type: Value.Type, _ sql: String, _ arguments: StatementArguments = []
    ) throws -> Value? {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        return try statement.step() ? try statement.decode(Value.self, at: 0) : nil
    }

    /// Inserts `record` as a row of `table`.
    ///
    /// It writes one column per stored property (see `RecordEncoder`).
    ///
    /// The statement is prepared once per table and set of columns, and reused.
    ///
    /// - Parameters:
    ///   - record: the row.
    ///   - table: the table's name.
    ///   - conflict: what to do when a row with the same key exists.
    /// - Returns: the new row's rowid (its `INTEGER PRIMARY KEY` when the table has one).
    /// - Throws: the insert's `StoreError` (`StoreError.Code.constraint` for a duplicate key with
    ///   ``ConflictResolution/abort``); `StoreError.Code.misuse` when `record` does not encode as columns.
    @discardableResult
    public func insert(_ record: some Encodable, into table: String, onConflict conflict: ConflictResolution = .abort) throws -> Int64 {
        let columns = try RecordEncoder.columns(of: record)
        guard !columns.isEmpty else {
            throw StoreError(code: .misuse, message: "a record with no stored property cannot be inserted into `\(table)`")
        }
        let verb = conflict == .abort ? "INSERT" : "INSERT OR \(conflict.rawValue)"
        let names = columns.map { Self.quote($0.name) }.joined(separator: ", ")
        let placeholders = repeatElement("?", count: columns.count).joined(separator: ", ")
        try execute("\(verb) INTO \(Self.quote(table))(\(names)) VALUES (\(placeholders))", columns.map(\.value))
        return lastInsertedRowID
    }

    /// `name` as an SQL identifier, in double quotes, so that a column called `order` or `group` works.
    static func quote(_ name: String) -> String {
        "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
