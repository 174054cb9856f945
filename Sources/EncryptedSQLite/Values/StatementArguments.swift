/// The values a statement's parameters are bound to.
///
/// They are bound in order for `?` parameters, by name for `:name`, `@name` and `$name` ones.
///
/// ```swift
/// try database.execute("INSERT INTO notes(id, title) VALUES (?, ?)",
///                      [note.id, note.title])
/// try database.execute("UPDATE notes SET title = :title WHERE id = :id",
///                      ["id": id, "title": title])
/// try database.execute("UPDATE notes SET title = :title, body = :body WHERE id = :id",
///                      StatementArguments(encoding: note))
/// ```
///
/// Every parameter must get a value and every value must have a parameter: a count that does not match, or
/// a name the statement does not have, fails with `StoreError.Code.misuse` rather than binding `NULL`.
public struct StatementArguments: Sendable, Hashable {
    /// The values for `?` parameters, in order.
    public var values: [DatabaseValue]
    /// The values for named parameters, by name without its `:`, `@` or `$`.
    public var namedValues: [String: DatabaseValue]

    /// Positional arguments.
    public init(_ values: [any DatabaseValueConvertible]) {
        self.values = values.map(\.databaseValue)
        self.namedValues = [:]
    }

    /// Positional arguments that are already database values.
    public init(values: [DatabaseValue]) {
        self.values = values
        self.namedValues = [:]
    }

    /// Named arguments, by parameter name with or without its `:`, `@` or `$`.
    public init(named: [String: any DatabaseValueConvertible]) {
        self.values = []
        self.namedValues = Dictionary(
            named.map { (Self.bareName($0.key), $0.value.databaseValue) }, uniquingKeysWith: { _, last in last })
    }

    /// Named arguments for every stored property of `record`, as the record encoder stores them.
    ///
    /// See ``Database/insert(_:into:onConflict:)``.
    ///
    /// - Throws: when `record` does not encode as a flat set of columns.
    public init(encoding record: some Encodable) throws {
        self.values = []
        self.namedValues = Dictionary(
            try RecordEncoder.columns(of: record).map { ($0.name, $0.value) }, uniquingKeysWith: { _, last in last })
    }

    /// Whether there is no value at all.
    public var isEmpty: Bool { values.isEmpty && namedValues.isEmpty }

    /// `name` without its leading `:`, `@` or `$`.
    static func bareName(_ name: String) -> String {
        guard let first = name.utf8.first, first == UInt8(ascii: ":") || first == UInt8(ascii: "@") || first == UInt8(ascii: "$")
        else { return name }
        return String(name.dropFirst())
    }
}

extension StatementArguments: ExpressibleByArrayLiteral {
    /// Positional arguments, as in `[id, title]`.
    ///
    /// `nil` binds `NULL`.
    public init(arrayLiteral elements: (any DatabaseValueConvertible)?...) {
        self.values = elements.map { $0?.databaseValue ?? .null }
        self.namedValues = [:]
    }
}

extension StatementArguments: ExpressibleByDictionaryLiteral {
    /// Named arguments, as in `["id": id, "title": title]`.
    ///
    /// `nil` binds `NULL`.
    public init(dictionaryLiteral elements: (String, (any DatabaseValueConvertible)?)...) {
        self.values = []
        self.namedValues = Dictionary(
            elements.map { (Self.bareName($0.0), $0.1?.databaseValue ?? .null) }, uniquingKeysWith: { _, last in last })
    }
}
