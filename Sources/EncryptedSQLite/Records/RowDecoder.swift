internal import Foundation

/// Decodes a `Decodable` record from a ``Row``.
///
/// Each coding key names a column.
///
/// The counterpart of ``RecordEncoder``: a property whose type is ``DatabaseValueConvertible`` is converted
/// from its column (see that protocol for what converts); any other `Decodable` property is read as JSON text.
/// A missing column decodes as `nil` for an optional property and fails, naming the column and the columns
/// the row has, for any other.
struct RowDecoder: Decoder {
    let row: Row
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    static func decode<Record: Decodable>(_ type: Record.Type, from row: Row) throws -> Record {
        do {
            return try Record(from: RowDecoder(row: row))
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(code: .misuse, message: "a row does not decode as \(Record.self): \(Self.describe(error))")
        }
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        KeyedDecodingContainer(ColumnContainer<Key>(row: row))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw StoreError(code: .misuse, message: "a row decodes into a type with named properties, not an unkeyed list")
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        throw StoreError(
            code: .misuse,
            message: "a row decodes into a type with named properties; read a single column with fetchValues or Row.decode")
    }

    /// Reads each property from its column.
    struct ColumnContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let row: Row
        var codingPath: [any CodingKey] { [] }
        var allKeys: [Key] { row.columnNames.compactMap(Key.init(stringValue:)) }

        func contains(_ key: Key) -> Bool { row.index(ofColumn: key.stringValue) != nil }

        func decodeNil(forKey key: Key) throws -> Bool {
            row[key.stringValue].map { $0 == .null } ?? true
        }

        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            let column = key.stringValue
            guard let value = row[column] else {
                throw StoreError(
                    code: .misuse,
                    message: "no column `\(column)` for the property of that name (the row has \(row.columnNames.joined(separator: ", ")))")
            }
            if let convertible = T.self as? any DatabaseValueConvertible.Type {
                guard let converted = convertible.fromDatabaseValue(value) as? T else {
                    throw StoreError(
                        code: .misuse, message: "column `\(column)` holds \(value.kindName), which does not convert to \(T.self)")
                }
                return converted
            }
            guard case .text(let json) = value else {
                throw StoreError(
                    code: .misuse, message: "column `\(column)` holds \(value.kindName); \(T.self) is read from JSON text")
            }
            do {
                return try JSONDecoder().decode(T.self, from: Data(json.utf8))
            } catch {
                throw StoreError(
                    code: .misuse, message: "column `\(column)` does not decode as \(T.self): \(RowDecoder.describe(error))")
            }
        }

        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try decode(key) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try decode(key) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try decode(key) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float { try decode(key) }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try decode(key) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try decode(key) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 { try decode(key) }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 { try decode(key) }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 { try decode(key) }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try decode(key) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 { try decode(key) }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 { try decode(key) }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 { try decode(key) }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 { try decode(key) }

        /// A column value converted to `Value`, without the generic path's dynamic casts.
        private func decode<Value: DatabaseValueConvertible>(_ key: Key) throws -> Value {
            try row.decode(Value.self, column: key.stringValue)
        }

        func nestedContainer<NestedKey: CodingKey>(
            keyedBy type: NestedKey.Type, forKey key: Key
        ) throws -> KeyedDecodingContainer<NestedKey> {
            throw StoreError(code: .misuse, message: "column `\(key.stringValue)`: a column cannot hold a nested container")
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            throw StoreError(code: .misuse, message: "column `\(key.stringValue)`: a column cannot hold a nested container")
        }

        func superDecoder() throws -> any Decoder { RowDecoder(row: row) }
        func superDecoder(forKey key: Key) throws -> any Decoder { RowDecoder(row: row) }
    }

    /// A `DecodingError` in a sentence, without the values it may quote.
    static func describe(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return String(describing: error) }
        switch error {
        case .typeMismatch(let type, let context): return "expected \(type) at \(path(context))"
        case .valueNotFound(let type, let context): return "no \(type) value at \(path(context))"
        case .keyNotFound(let key, let context): return "no `\(key.stringValue)` at \(path(context))"
        case .dataCorrupted(let context): return "malformed data at \(path(context))"
        @unknown default: return "malformed data"
        }
    }

    private static func path(_ context: DecodingError.Context) -> String {
        context.codingPath.isEmpty ? "the top level" : context.codingPath.map(\.stringValue).joined(separator: ".")
    }
}
