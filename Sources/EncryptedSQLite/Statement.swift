internal import CSQLCipher

/// A prepared statement.
///
/// Bind values, step through rows, reset, repeat.
///
/// Owned by its ``Database``, like the database it is not `Sendable`.
public final class Statement {
    /// The SQL text this statement was prepared from.
    public let sql: String
    private let handle: OpaquePointer
    private let databaseHandle: OpaquePointer
    private let path: String
    private let hooks: ConnectionHooks
    /// The tables the statement reads and writes, from SQLite's authorizer when it was compiled.
    private let reads: TableRegion
    private let writes: TableRegion
    /// Whether the statement returns rows.
    private let isQuery: Bool
    /// Whether the statement ran since its last reset (a reset is then due before the next bind).
    private var needsReset = false
    /// Whether the next step is the first of a run.
    private var isStarting = true
    private var cachedColumnNames: [String]?
    /// Whether an open ``DatabaseCursor`` is stepping through this statement.
    ///
    /// The connection's statement cache then prepares another for the same SQL rather than hand this one out and
    /// have it reset under the cursor.
    var isHeldByCursor = false
    private var cachedParameterNames: [String?]?

    init(sql: String, databaseHandle: OpaquePointer, path: String, hooks: ConnectionHooks) throws {
        var statement: OpaquePointer?
        hooks.willCompile()
        // `tail` points into the C string, so it is read inside withCString, while that buffer lives (a String
        // passed straight to a C function gets a temporary copy, freed as the call returns).
        let (code, holdsMore) = sql.withCString { text in
            var tail: UnsafePointer<CChar>?
            let code = sqlite3_prepare_v2(databaseHandle, text, -1, &statement, &tail)
            return (code, code == SQLITE_OK && tail.map(Statement.containsStatement) == true)
        }
        guard code == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw StoreError(
                resultCode: code,
                message: code == SQLITE_OK ? "the SQL holds no statement" : String(cString: sqlite3_errmsg(databaseHandle)),
                sql: sql, path: path)
        }
        if holdsMore {
            sqlite3_finalize(statement)
            throw StoreError(
                code: .misuse,
                message: "a prepared statement is one statement; this SQL holds more (run several with execute(_:) and no arguments)",
                sql: sql, path: path)
        }
        self.sql = sql
        self.handle = statement
        self.databaseHandle = databaseHandle
        self.path = path
        self.hooks = hooks
        self.reads = hooks.compiledReads
        self.writes = hooks.compiledWrites
        self.isQuery = sqlite3_column_count(statement) > 0
    }

    deinit {
        sqlite3_finalize(handle)
    }

    /// The number of columns a row has.
    public var columnCount: Int { Int(sqlite3_column_count(handle)) }

    /// The column names, in order (found once).
    public var columnNames: [String] {
        if let cachedColumnNames { return cachedColumnNames }
        let names = (0..<columnCount).map(columnName(at:))
        cachedColumnNames = names
        return names
    }

    /// Resets the statement and binds `arguments` to its parameters.
    ///
    /// `?` parameters are bound in order, named ones (`:name`, `@name`, `$name`) by name.
    ///
    /// - Throws: `StoreError.Code.misuse` when a parameter has no value or a value no parameter, naming it.
    public func bind(_ arguments: StatementArguments) throws {
        guard !arguments.namedValues.isEmpty else {
            try bind(arguments.values)
            return
        }
        resetIfNeeded()
        let names = parameterNames
        guard arguments.values.isEmpty else {
            throw misuse("a statement's arguments are all positional or all named, not both")
        }
        var unused = Set(arguments.namedValues.keys)
        for (offset, name) in names.enumerated() {
            guard let name else { throw misuse("parameter \(offset + 1) is a `?`, which takes a positional argument") }
            let bare = StatementArguments.bareName(name)
            guard let value = arguments.namedValues[bare] else { throw misuse("no value for parameter \(name)") }
            unused.remove(bare)
            try bind(value, at: Int32(offset + 1))
        }
        if let extra = unused.sorted().first {
            throw misuse("the statement has no parameter named `\(extra)`")
        }
    }

    /// Resets the statement and binds `values` to its parameters in order (`?` or `?NNN`).
    ///
    /// - Throws: `StoreError.Code.misuse` when the count does not match.
    public func bind(_ values: [DatabaseValue]) throws {
        resetIfNeeded()
        let expected = Int(sqlite3_bind_parameter_count(handle))
        guard values.count == expected else {
            throw misuse("statement takes \(expected) arguments, got \(values.count)")
        }
        for index in values.indices {
            try bind(values[index], at: Int32(index + 1))
        }
    }

    /// Advances to the next row.
    ///
    /// - Returns: `true` when a row is available, `false` when the statement is done.
    public func step() throws -> Bool {
        if isStarting {
            isStarting = false
            hooks.statementWillRun(reads: reads, writes: writes, isQuery: isQuery)
        }
        needsReset = true
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            // sqlite3_reset returns the same error and leaves the statement reusable.
            reset()
            throw StoreError(
                resultCode: code, message: String(cString: sqlite3_errmsg(databaseHandle)), sql: sql, path: path,
                systemErrno: sqlite3_system_errno(databaseHandle))
        }
    }

    /// The value of column `index` of the current row.
    public func value(at index: Int) -> DatabaseValue {
        let column = Int32(index)
        switch sqlite3_column_type(handle, column) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, column))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, column))
        case SQLITE_TEXT:
            // The length first (sqlite3_column_bytes after sqlite3_column_text, as SQLite's documentation
            // orders them); no strlen, and a NUL inside the text is kept.
            guard let text = sqlite3_column_text(handle, column) else { return .text("") }
            let count = Int(sqlite3_column_bytes(handle, column))
            return .text(String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, column))
            guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default: return .null
        }
    }

    /// The text of column `index` of the current row, or `nil` when it is `NULL`.
    ///
    /// It does not ask SQLite for the column's type first, for loops over many rows. SQLite converts a number to
    /// its text.
    public func string(at index: Int) -> String? {
        let column = Int32(index)
        guard let text = sqlite3_column_text(handle, column) else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// The integer in column `index` of the current row, in one call.
    ///
    /// SQLite converts text and reals, and reads `NULL` as 0 (use ``value(at:)`` or ``decode(_:at:)`` to tell
    /// `NULL` apart).
    public func int64(at index: Int) -> Int64 {
        sqlite3_column_int64(handle, Int32(index))
    }

    /// The real number in column `index` of the current row, in one call.
    ///
    /// SQLite converts integers and text, and reads `NULL` as 0.
    public func double(at index: Int) -> Double {
        sqlite3_column_double(handle, Int32(index))
    }

    /// The value of column `index` of the current row, as a `Value`.
    ///
    /// - Throws: `StoreError.Code.misuse` when the stored value does not convert.
    public func decode<Value: DatabaseValueConvertible>(_ type: Value.Type = Value.self, at index: Int) throws -> Value {
        let value = value(at: index)
        guard let converted = Value.fromDatabaseValue(value) else {
            throw misuse("column `\(columnName(at: index))` holds \(value.kindName), which does not convert to \(Value.self)")
        }
        return converted
    }

    /// The name of column `index`.
    public func columnName(at index: Int) -> String {
        String(cString: sqlite3_column_name(handle, Int32(index)))
    }

    /// Binds `arguments` and runs the statement to completion, ignoring any rows.
    public func execute(_ arguments: StatementArguments = []) throws {
        try bind(arguments)
        try run()
    }

    /// Binds `values` and runs the statement to completion, ignoring any rows.
    public func execute(_ values: [DatabaseValue]) throws {
        try bind(values)
        try run()
    }

    /// Binds `values` and the text at `position`, then runs the statement to completion.
    ///
    /// The text at `position` (1-based) is bound straight from `text`, read in place by SQLite, not copied. The
    /// bindings are cleared before this returns, so SQLite never keeps the pointer. This is for a value too large
    /// to copy twice (the inbox merge's 4 MiB values). The bytes must be valid UTF-8.
    ///
    /// - Parameter values: every argument; the one at `position` is replaced by `text`.
    package func execute(_ values: [DatabaseValue], borrowingText text: UnsafeRawBufferPointer, at position: Int) throws {
        try bind(values)
        defer {
            reset()
            releaseBindings()
        }
        let code: Int32
        if let base = text.baseAddress, !text.isEmpty {
            // SQLITE_STATIC (a null destructor): SQLite reads the caller's bytes for as long as they are bound.
            code = sqlite3_bind_text(handle, Int32(position), base.assumingMemoryBound(to: CChar.self), Int32(text.count), nil)
        } else {
            // Empty text still needs a pointer: a NULL one would bind SQL NULL.
            code = sqlite3_bind_text(handle, Int32(position), "", 0, _ps_sqlite_transient())
        }
        guard code == SQLITE_OK else {
            throw StoreError(resultCode: code, message: String(cString: sqlite3_errmsg(databaseHandle)), sql: sql, path: path)
        }
        while try step() {}
    }

    /// Binds `arguments` and collects every row.
    public func rows(_ arguments: StatementArguments = []) throws -> [Row] {
        try bind(arguments)
        return try collectRows()
    }

    /// Binds `values` and collects every row.
    public func rows(_ values: [DatabaseValue]) throws -> [Row] {
        try bind(values)
        return try collectRows()
    }

    /// Resets the statement, ending a run early.
    ///
    /// Its read lock (or its part of a write) is released.
    public func reset() {
        sqlite3_reset(handle)
        needsReset = false
        isStarting = true
    }

    // MARK: Private

    private func run() throws {
        while try step() {}
        reset()
        releaseBindings()
    }

    /// Lets SQLite free the copies of the values just bound (`sqlite3_clear_bindings`).
    ///
    /// A cached statement would otherwise keep its last arguments, such as a 4 MiB value or a secret, until it
    /// runs again. Only after a run that bound every argument itself (`execute` and `rows`).
    func releaseBindings() {
        sqlite3_clear_bindings(handle)
    }

    private func collectRows() throws -> [Row] {
        let names = columnNames
        let count = names.count
        var rows: [Row] = []
        while try step() {
            var values: [DatabaseValue] = []
            values.reserveCapacity(count)
            for index in 0..<count { values.append(value(at: index)) }
            rows.append(Row(columnNames: names, values: values))
        }
        reset()
        releaseBindings()
        return rows
    }

    private func resetIfNeeded() {
        if needsReset { reset() }
    }

    /// The names of the parameters, `nil` for a `?` (found once).
    private var parameterNames: [String?] {
        if let cachedParameterNames { return cachedParameterNames }
        let names = (0..<Int32(sqlite3_bind_parameter_count(handle))).map {
            sqlite3_bind_parameter_name(handle, $0 + 1).map { String(cString: $0) }
        }
        cachedParameterNames = names
        return names
    }

    private func bind(_ value: DatabaseValue, at index: Int32) throws {
        let code: Int32
        switch value {
        case .null: code = sqlite3_bind_null(handle, index)
        case .integer(let integer): code = sqlite3_bind_int64(handle, index, integer)
        case .real(let real): code = sqlite3_bind_double(handle, index, real)
        case .text(var text):
            // The UTF-8 bytes with their length: no strlen, no C-string copy of a native string. Empty text
            // still needs a pointer: a NULL one would bind SQL NULL.
            code = text.withUTF8 { utf8 in
                guard let base = utf8.baseAddress, !utf8.isEmpty else {
                    return sqlite3_bind_text(handle, index, "", 0, _ps_sqlite_transient())
                }
                return base.withMemoryRebound(to: CChar.self, capacity: utf8.count) {
                    sqlite3_bind_text(handle, index, $0, Int32(utf8.count), _ps_sqlite_transient())
                }
            }
        case .blob(let bytes):
            // An empty blob is a zero-length blob, not NULL (which a NULL pointer would bind).
            code = bytes.withUnsafeBytes { raw in
                guard let base = raw.baseAddress, !raw.isEmpty else { return sqlite3_bind_zeroblob(handle, index, 0) }
                return sqlite3_bind_blob(handle, index, base, Int32(raw.count), _ps_sqlite_transient())
            }
        }
        guard code == SQLITE_OK else {
            throw StoreError(
                resultCode: code, message: String(cString: sqlite3_errmsg(databaseHandle)), sql: sql, path: path)
        }
    }

    private func misuse(_ message: String) -> StoreError {
        StoreError(code: .misuse, message: message, sql: sql, path: path)
    }

    /// Whether `tail` (what follows a statement) holds another statement, not just spaces, semicolons or
    /// comments.
    private static func containsStatement(_ tail: UnsafePointer<CChar>) -> Bool {
        var pointer = tail
        while pointer.pointee != 0 {
            switch UInt8(bitPattern: pointer.pointee) {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: ";"):
                pointer += 1
            case UInt8(ascii: "-") where pointer[1] == CChar(UInt8(ascii: "-")):
                while pointer.pointee != 0 && pointer.pointee != CChar(UInt8(ascii: "\n")) { pointer += 1 }
            default:
                return true
            }
        }
        return false
    }
}

@available(*, unavailable)
extension Statement: Sendable {}
