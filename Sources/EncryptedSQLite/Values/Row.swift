/// One result row, with its values in column order.
///
/// The values are readable by index or by column name, as a ``DatabaseValue`` or converted to a Swift type. The
/// row can also be decoded whole into a `Decodable` record (``Database/fetchAll(_:_:_:)``).
public struct Row: Sendable, Hashable {
    /// The column names, in order.
    public let columnNames: [String]
    /// The values, in column order.
    public let values: [DatabaseValue]

    /// A row of `values` under `columnNames`, one name per value.
    public init(columnNames: [String], values: [DatabaseValue]) {
        precondition(columnNames.count == values.count, "a row has one name per value")
        self.columnNames = columnNames
        self.values = values
    }

    /// The value of column `index`.
    public subscript(_ index: Int) -> DatabaseValue { values[index] }

    /// The value of the column named `name` (the first one, as SQLite does, when a join repeats it), or
    /// `nil` when there is no such column. Column names compare without regard to ASCII case, as in SQL.
    public subscript(_ name: String) -> DatabaseValue? {
        index(ofColumn: name).map { values[$0] }
    }

    /// The value of column `index` as a `Value`.
    ///
    /// - Throws: `StoreError.Code.misuse` when the stored value does not convert (a `NULL` read as a
    ///   non-optional type, text read as a number), naming the column and both types.
    public func decode<Value: DatabaseValueConvertible>(_ type: Value.Type = Value.self, at index: Int) throws -> Value {
        guard index >= 0, index < values.count else {
            throw StoreError(code: .misuse, message: "the row has \(values.count) columns, no column \(index)")
        }
        return try convert(values[index], column: columnNames[index])
    }

    /// The value of the column named `name` as a `Value`.
    ///
    /// - Throws: `StoreError.Code.misuse` when there is no such column or its value does not convert.
    public func decode<Value: DatabaseValueConvertible>(_ type: Value.Type = Value.self, column name: String) throws -> Value {
        guard let index = index(ofColumn: name) else {
            throw StoreError(
                code: .misuse, message: "the row has no column `\(name)` (it has \(columnNames.joined(separator: ", ")))")
        }
        return try convert(values[index], column: name)
    }

    /// The index of the column named `name`.
    ///
    /// It looks for an exact match first, then one without regard to ASCII case.
    func index(ofColumn name: String) -> Int? {
        if let exact = columnNames.firstIndex(of: name) { return exact }
        return columnNames.firstIndex { $0.utf8.count == name.utf8.count && $0.lowercased() == name.lowercased() }
    }

    private func convert<Value: DatabaseValueConvertible>(_ value: DatabaseValue, column: String) throws -> Value {
        guard let converted = Value.fromDatabaseValue(value) else {
            throw StoreError(
                code: .misuse,
                message: "column `\(column)` holds \(value.kindName), which does not convert to \(Value.self)")
        }
        return converted
    }
}

extension DatabaseValue {
    /// The SQL storage class, for error messages.
    ///
    /// It is never the value itself, which may be private.
    var kindName: String {
        switch self {
        case .null: "NULL"
        case .integer: "an INTEGER"
        case .real: "a REAL"
        case .text: "TEXT"
        case .blob: "a BLOB"
        }
    }
}
