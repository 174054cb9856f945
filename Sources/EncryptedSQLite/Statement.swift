internal import CSQLCipher

/// A prepared statement: bind values, step through rows, reset, repeat.
///
/// Owned by its ``Database``, like the database it is not `Sendable`.
public final class Statement {
    /// The SQL text this statement was prepared from.
    public let sql: String
    private let handle: OpaquePointer
    private let databaseHandle: OpaquePointer
    private let path: String

    init(sql: String, databaseHandle: OpaquePointer, path: String) throws {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v2(databaseHandle, sql, -1, &statement, nil)
        guard code == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw SQLiteError(
                resultCode: code, message: String(cString: sqlite3_errmsg(databaseHandle)), sql: sql, path: path)
        }
        self.sql = sql
        self.handle = statement
        self.databaseHandle = databaseHandle
        self.path = path
    }

    deinit {
        sqlite3_finalize(handle)
    }

    /// The number of columns a row has.
    public var columnCount: Int { Int(sqlite3_column_count(handle)) }

    /// Resets the statement and binds `arguments` to its parameters in order (`?` or `?NNN`).
    ///
    /// - Throws: ``SQLiteError/Code/misuse`` when the count does not match.
    public func bind(_ arguments: [DatabaseValue]) throws {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
        let expected = Int(sqlite3_bind_parameter_count(handle))
        guard arguments.count == expected else {
            throw SQLiteError(
                code: .misuse, message: "statement takes \(expected) arguments, got \(arguments.count)", sql: sql,
                path: path)
        }
        for (offset, value) in arguments.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .null: code = sqlite3_bind_null(handle, index)
            case .integer(let integer): code = sqlite3_bind_int64(handle, index, integer)
            case .real(let real): code = sqlite3_bind_double(handle, index, real)
            case .text(let text): code = sqlite3_bind_text(handle, index, text, -1, _ps_sqlite_transient())
            case .blob(let bytes):
                code = bytes.withUnsafeBytes {
                    sqlite3_bind_blob(handle, index, $0.baseAddress, Int32($0.count), _ps_sqlite_transient())
                }
            }
            try check(code)
        }
    }

    /// Advances to the next row.
    ///
    /// - Returns: `true` when a row is available, `false` when the statement is done.
    public func step() throws -> Bool {
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            // sqlite3_reset returns the same error and leaves the statement reusable.
            sqlite3_reset(handle)
            throw SQLiteError(
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
            guard let text = sqlite3_column_text(handle, column) else { return .text("") }
            return .text(String(cString: text))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(handle, column))
            guard count > 0, let bytes = sqlite3_column_blob(handle, column) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default: return .null
        }
    }

    /// The name of column `index`.
    public func columnName(at index: Int) -> String {
        String(cString: sqlite3_column_name(handle, Int32(index)))
    }

    /// Binds `arguments` and runs the statement to completion, ignoring any rows.
    public func execute(_ arguments: [DatabaseValue] = []) throws {
        try bind(arguments)
        while try step() {}
        sqlite3_reset(handle)
    }

    /// Binds `arguments` and collects every row.
    public func rows(_ arguments: [DatabaseValue] = []) throws -> [Row] {
        try bind(arguments)
        let names = (0..<columnCount).map(columnName(at:))
        var rows: [Row] = []
        while try step() {
            rows.append(Row(columnNames: names, values: (0..<names.count).map(value(at:))))
        }
        sqlite3_reset(handle)
        return rows
    }

    private func check(_ code: Int32) throws {
        guard code == SQLITE_OK else {
            throw SQLiteError(
                resultCode: code, message: String(cString: sqlite3_errmsg(databaseHandle)), sql: sql, path: path)
        }
    }
}

@available(*, unavailable)
extension Statement: Sendable {}
