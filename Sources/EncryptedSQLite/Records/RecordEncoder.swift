internal import Foundation

/// Turns an `Encodable` record into named column values.
///
/// It makes one column per stored property, named by its coding key.
///
/// A property whose type is ``DatabaseValueConvertible`` (numbers, `Bool`, `String`, `Data`, `Date`, `UUID`,
/// optionals of them) is stored as that type says; `nil` is `NULL`, also for optionals the synthesized
/// `Encodable` would skip. Any other `Encodable` property (an array, a nested struct, an enum with
/// associated values) is stored as JSON text with sorted keys, and ``RowDecoder`` reads it back the same way.
enum RecordEncoder {
    /// The columns of `record`, in the order its `encode(to:)` wrote them.
    static func columns(of record: some Encodable) throws -> [(name: String, value: DatabaseValue)] {
        let storage = Storage()
        try record.encode(to: ColumnEncoder(storage: storage))
        if let failure = storage.failure { throw failure }
        return storage.columns
    }

    /// What an encoding collects.
    final class Storage {
        var columns: [(name: String, value: DatabaseValue)] = []
        var failure: StoreError?

        func set(_ value: DatabaseValue, for name: String) {
            if let index = columns.firstIndex(where: { $0.name == name }) {
                columns[index].value = value
            } else {
                columns.append((name, value))
            }
        }

        func fail(_ message: String) {
            if failure == nil { failure = StoreError(code: .misuse, message: message) }
        }
    }

    /// The top-level encoder.
    ///
    /// Only a keyed container makes sense for a row.
    struct ColumnEncoder: Encoder {
        let storage: Storage
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            KeyedEncodingContainer(ColumnContainer<Key>(storage: storage))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            storage.fail("a record is encoded as named columns; this type encodes an unkeyed list")
            return DiscardingContainer()
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            storage.fail("a record is encoded as named columns; this type encodes a single value")
            return DiscardingContainer()
        }
    }

    /// Stores each property as a column.
    struct ColumnContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let storage: Storage
        var codingPath: [any CodingKey] { [] }

        mutating func encodeNil(forKey key: Key) throws { storage.set(.null, for: key.stringValue) }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            storage.set(try RecordEncoder.databaseValue(of: value, column: key.stringValue), for: key.stringValue)
        }

        // The synthesized `encode(to:)` skips a `nil` optional with `encodeIfPresent`; a column must still
        // be written (as `NULL`), so that an update clears it and a named argument exists for it.
        mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws {
            if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
        }
        mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try encodeOptional(value, key) }
        mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try encodeOptional(value, key) }

        private mutating func encodeOptional<T: Encodable>(_ value: T?, _ key: Key) throws {
            if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
        }

        mutating func nestedContainer<NestedKey: CodingKey>(
            keyedBy keyType: NestedKey.Type, forKey key: Key
        ) -> KeyedEncodingContainer<NestedKey> {
            storage.fail("column `\(key.stringValue)`: a nested container cannot be a column; give the property a Codable type")
            return KeyedEncodingContainer(ColumnContainer<NestedKey>(storage: Storage()))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            storage.fail("column `\(key.stringValue)`: a nested container cannot be a column; give the property a Codable type")
            return DiscardingContainer()
        }

        mutating func superEncoder() -> any Encoder { ColumnEncoder(storage: storage) }
        mutating func superEncoder(forKey key: Key) -> any Encoder { ColumnEncoder(storage: storage) }
    }

    /// The column value of one property.
    static func databaseValue<T: Encodable>(of value: T, column: String) throws -> DatabaseValue {
        if let convertible = value as? any DatabaseValueConvertible { return convertible.databaseValue }
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return .text(String(decoding: try encoder.encode(value), as: UTF8.self))
        } catch {
            throw StoreError(code: .misuse, message: "column `\(column)`: \(T.self) does not encode as JSON (\(error))")
        }
    }
}

/// An encoder that keeps nothing.
///
/// A failed record encoding writes to it after its failure is recorded.
private struct DiscardingEncoder: Encoder {
    var codingPath: [any CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        KeyedEncodingContainer(RecordEncoder.ColumnContainer<Key>(storage: RecordEncoder.Storage()))
    }
    func unkeyedContainer() -> any UnkeyedEncodingContainer { DiscardingContainer() }
    func singleValueContainer() -> any SingleValueEncodingContainer { DiscardingContainer() }
}

private struct DiscardingContainer: UnkeyedEncodingContainer, SingleValueEncodingContainer {
    var codingPath: [any CodingKey] { [] }
    var count: Int { 0 }
    mutating func encodeNil() throws {}
    mutating func encode<T: Encodable>(_ value: T) throws {}
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        DiscardingEncoder().container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { DiscardingContainer() }
    mutating func superEncoder() -> any Encoder { DiscardingEncoder() }
}
