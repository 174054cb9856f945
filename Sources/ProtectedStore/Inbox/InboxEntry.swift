public import SecureKeys
internal import Foundation

/// One record of the locked inbox, opened.
///
/// It holds its identifier, its kind and schema version, and its body.
///
/// The body stays in guarded memory until it is decoded: ``change`` for the built-in key-value changes,
/// ``decode(_:)`` for an app's own ``InboxChange``.
public struct InboxEntry: Sendable {
    /// A record's identifier.
    ///
    /// It is 16 random bytes, recorded in the store when the record is merged, so it is never applied twice.
    public struct ID: Hashable, Sendable, CustomStringConvertible {
        /// The 16 bytes.
        public let bytes: [UInt8]

        /// An identifier with these bytes.
        ///
        /// - Parameter bytes: 16 bytes.
        public init(bytes: [UInt8]) { self.bytes = bytes }

        /// A fresh random identifier.
        static func random(using random: any RandomSource = SystemRandom()) -> ID {
            ID(bytes: random.bytes(count: InboxEntry.idLength))
        }

        /// The bytes in lowercase hex, as the tool names a record.
        public var description: String { bytes.map { String(format: "%02x", $0) }.joined() }
    }

    /// The built-in key-value changes.
    ///
    /// The command-line tool's app and ``StoreCoordinator/put(_:_:)`` use them.
    public enum Change: Sendable, Hashable {
        /// Store `value` under `key`, replacing what was there.
        case put(key: String, value: String)
        /// Remove `key`.
        case delete(key: String)

        /// The kind a record of this change carries.
        var kind: String {
            switch self {
            case .put: InboxEntry.putKind
            case .delete: InboxEntry.deleteKind
            }
        }
    }

    /// The record's identifier.
    public let id: ID
    /// The change's kind.
    ///
    /// It is `put`, `delete`, or an app's ``InboxChange/kind``.
    public let kind: String
    /// The schema version the writer encoded the change with.
    public let schemaVersion: Int
    /// The record's sequence number (payload version 3).
    ///
    /// It is above every record the store merged before it, or the record is a replay. `nil` for a record of
    /// payload version 1 or 2, which carry none.
    public let sequence: UInt64?
    /// The opened payload, in guarded memory, and where the body lies in it.
    ///
    /// The body is read in place, never copied out until a field of it is decoded.
    let payload: SecureBytes
    let bodyRange: Range<Int>
    /// Where this entry's payload lies in `payload` when it shares that buffer with other entries.
    ///
    /// A merge opens a window of records into one guarded buffer. `nil` when the buffer is the entry's alone.
    let sharedRange: Range<Int>?

    /// Calls `read` with the body's bytes, in place.
    private func withBody<Result>(_ read: (UnsafeRawBufferPointer) throws -> Result) throws -> Result {
        try payload.withUnsafeBytes { try read(UnsafeRawBufferPointer(rebasing: $0[bodyRange])) }
    }

    /// Zeroes the payload now, rather than when the last copy of the entry goes away.
    ///
    /// It zeroes only its own part of a buffer it shares. The buffer's owner wipes and frees the whole.
    func wipe() {
        guard let sharedRange else { return payload.wipe() }
        _ = try? payload.withUnsafeMutableBytes { secureZero(UnsafeMutableRawBufferPointer(rebasing: $0[sharedRange])) }
    }

    /// The built-in change, for a record of kind `put` or `delete`.
    ///
    /// `nil` for an app's own change.
    ///
    /// - Throws: a `StoreError` with `StoreError.Code.inboxRecordMalformed` when the body does not decode.
    public var change: Change? {
        get throws {
            guard kind == Self.putKind || kind == Self.deleteKind else { return nil }
            return try withBody { bytes in
                var reader = RawReader(bytes)
                guard let key = reader.readText() else { throw StoreError.inboxRecordMalformed(id: id, "no key") }
                if kind == Self.deleteKind {
                    guard reader.remaining == 0 else { throw StoreError.inboxRecordMalformed(id: id, "extra bytes after the key") }
                    return .delete(key: key)
                }
                guard let value = reader.readText(), reader.remaining == 0 else {
                    throw StoreError.inboxRecordMalformed(id: id, "no value")
                }
                return .put(key: key, value: value)
            }
        }
    }

    /// Calls `body` with the key of a built-in `put` record and its value's bytes, read in place.
    ///
    /// The value is valid UTF-8, checked without keeping a copy. The merge binds it straight into SQLite, so a
    /// 4 MiB value is never held twice before SQLite copies it into its row.
    ///
    /// - Throws: `StoreError.Code.inboxRecordMalformed` when the body does not decode (as ``change``).
    func withPut<Result>(_ body: (_ key: String, _ value: UnsafeRawBufferPointer) throws -> Result) throws -> Result {
        precondition(kind == Self.putKind, "withPut reads a put record")
        return try withBody { bytes in
            var reader = RawReader(bytes)
            guard let key = reader.readText() else { throw StoreError.inboxRecordMalformed(id: id, "no key") }
            guard let length = reader.readUInt32(), let value = reader.read(Int(length)), reader.remaining == 0,
                String(validating: value, as: UTF8.self) != nil
            else { throw StoreError.inboxRecordMalformed(id: id, "no value") }
            return try body(key, value)
        }
    }

    /// Decodes the record as the app's change `type`.
    ///
    /// - Parameter type: the change type whose ``InboxChange/kind`` the record carries.
    /// - Returns: the change.
    /// - Throws: a `StoreError`: `StoreError.Code.inboxUnknownKind` when the record is of another kind,
    ///   `StoreError.Code.inboxNewerSchema` when it was written with a newer schema version than `type`'s,
    ///   `StoreError.Code.inboxRecordMalformed` (its cause the `DecodingError`) when it does not decode.
    public func decode<Change: InboxChange>(_ type: Change.Type) throws -> Change {
        guard kind == Change.kind else { throw StoreError.inboxUnknownKind(kind, id: id) }
        guard schemaVersion <= Change.schemaVersion else {
            throw StoreError.inboxNewerSchema(kind: kind, version: schemaVersion, known: Change.schemaVersion, id: id)
        }
        return try withBody { bytes in
            var data = Data(bytes)
            defer { data.resetBytes(in: 0..<data.count) }
            do {
                return try JSONDecoder().decode(Change.self, from: data)
            } catch {
                throw StoreError.inboxRecordMalformed(id: id, "its \(kind) body does not decode", cause: error)
            }
        }
    }

    // MARK: Payload format (keys/README.md, "Inbox records")

    /// The payload version this code writes.
    ///
    /// It writes version 2 when no sequence is given, for tests and vectors.
    static let payloadVersion: UInt8 = 3
    /// The length of an identifier, in bytes.
    static let idLength = 16
    static let putKind = "put"
    static let deleteKind = "delete"
    /// The bytes of a put's payload (version 3) besides its value, key and kind.
    ///
    /// They are the version (1), id, sequence number (8), kind length (1), schema version (4), body length (4),
    /// and the key's and the value's lengths (4 each).
    static let putFieldsLength = 1 + idLength + 8 + 1 + 4 + 4 + 4 + 4

    /// The payload of a built-in change.
    ///
    /// It is version 2 ‖ id ‖ kind ‖ schema version 1 ‖ body (key, value).
    ///
    /// For the inbox, and for tests and fuzzers that build records by hand.
    ///
    /// - Throws: `StoreError.Code.inboxRecordTooLarge`.
    ///
    /// - Parameter sequence: the record's sequence number (payload version 3); `nil` writes version 2.
    @_spi(Testing)
    public static func payload(for change: Change, id: ID, sequence: UInt64? = nil) throws -> SecureBytes {
        var body = ByteWriter()
        defer { body.wipe() }
        switch change {
        case .put(let key, let value):
            body.writeText(key)
            body.writeText(value)
        case .delete(let key):
            body.writeText(key)
        }
        return try payload(id: id, kind: change.kind, schemaVersion: 1, body: body.bytes, sequence: sequence)
    }

    /// The payload of an app's change, with its JSON encoding as the body.
    static func payload<Change: InboxChange>(for change: Change, id: ID, sequence: UInt64? = nil) throws -> SecureBytes {
        let kind = Change.kind
        guard kind != putKind, kind != deleteKind else {
            throw StoreError(code: .invalidArgument, message: "an app's inbox change cannot be of kind `\(kind)`: it is the built-in key-value change's")
        }
        return try payload(id: id, kind: kind, schemaVersion: Change.schemaVersion, json: change, sequence: sequence)
    }

    /// A payload whose body is `value`'s JSON encoding (keys sorted).
    ///
    /// Every plaintext copy is zeroed.
    static func payload(
        id: ID, kind: String, schemaVersion: Int, json value: some Encodable, sequence: UInt64? = nil
    ) throws -> SecureBytes {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        var data = try encoder.encode(value)
        defer { data.resetBytes(in: 0..<data.count) }
        var body = Array(data)
        defer { secureZero(&body) }
        return try payload(id: id, kind: kind, schemaVersion: schemaVersion, body: body, sequence: sequence)
    }

    /// The payload of a record with these fields.
    ///
    /// The layout is version 3 ‖ id (16) ‖ u64 sequence ‖ u8 kind length ‖ kind ‖ u32 schema version ‖ u32 body
    /// length ‖ body, or version 2 (the same without the sequence) when `sequence` is `nil`.
    ///
    /// The caller owns `body` and wipes it; only the payload's own buffer is zeroed here.
    static func payload(id: ID, kind: String, schemaVersion: Int, body: [UInt8], sequence: UInt64? = nil) throws -> SecureBytes {
        guard !kind.isEmpty, kind.utf8.count <= 255 else {
            throw StoreError(
                code: .invalidArgument, message: "an inbox change's kind is 1 to 255 bytes of UTF-8; got \(kind.utf8.count) bytes")
        }
        guard schemaVersion >= 0, schemaVersion <= Int(UInt32.max) else {
            throw StoreError(code: .invalidArgument, message: "an inbox change's schema version is 0 to \(UInt32.max); got \(schemaVersion)")
        }
        let length = 1 + idLength + (sequence == nil ? 0 : 8) + 1 + kind.utf8.count + 4 + 4 + body.count
        guard length <= InboxRecord.maximumPayloadLength else {
            throw StoreError.inboxRecordTooLarge(payloadLength: length)
        }
        var writer = ByteWriter()
        defer { writer.wipe() }
        writer.write(sequence == nil ? 2 : payloadVersion)
        writer.write(id.bytes)
        if let sequence { writer.write(sequence) }
        writer.write(UInt8(kind.utf8.count))
        writer.write(Array(kind.utf8))
        writer.write(UInt32(schemaVersion))
        writer.write(UInt32(body.count))
        writer.write(body)
        return try writer.bytes.withUnsafeBytes { try SecureBytes(copying: $0) }
    }

    /// Reads a payload of version 1 (key-value only), 2 or 3 (with a sequence number).
    ///
    /// For the inbox, and for tests and fuzzers.
    ///
    /// - Returns: the entry, or `nil` when the bytes are not a valid payload.
    @_spi(Testing)
    public static func decode(payload: SecureBytes) -> InboxEntry? {
        try? payload.withUnsafeBytes { bytes in decode(bytes, in: payload, at: 0..<bytes.count, shared: false) } ?? nil
    }

    /// Reads the payload that lies at `range` of `buffer`, whose bytes are `bytes`.
    ///
    /// The bytes are read in place, without taking `buffer`'s lock. The caller holds it, and several threads may
    /// decode parts of one buffer.
    ///
    /// - Parameter shared: whether other entries share `buffer` (the entry then wipes only its part).
    /// - Returns: the entry, or `nil` when the bytes are not a valid payload.
    static func decode(_ bytes: UnsafeRawBufferPointer, in buffer: SecureBytes, at range: Range<Int>, shared: Bool) -> InboxEntry? {
        var reader = RawReader(UnsafeRawBufferPointer(rebasing: bytes[range]))
        guard let version = reader.readUInt8(), let idBytes = reader.read(idLength) else { return nil }
        let id = ID(bytes: Array(idBytes))
        let sharedRange = shared ? range : nil
        switch version {
        case 1:
            // v1: kind (1 put, 2 delete) ‖ key ‖ [value]: the body of v2's built-in kinds, after the kind byte.
            guard let kindByte = reader.readUInt8(), kindByte == 1 || kindByte == 2 else { return nil }
            return InboxEntry(
                id: id, kind: kindByte == 1 ? putKind : deleteKind, schemaVersion: 1, sequence: nil, payload: buffer,
                bodyRange: range.lowerBound + reader.offset..<range.upperBound, sharedRange: sharedRange)
        case 2, 3:
            var sequence: UInt64?
            if version == 3 {
                guard let value = reader.readUInt64(), value > 0 else { return nil }
                sequence = value
            }
            guard let kindLength = reader.readUInt8(), kindLength > 0, let kindBytes = reader.read(Int(kindLength)),
                let kind = String(validating: kindBytes, as: UTF8.self), let schema = reader.readUInt32(),
                let bodyLength = reader.readUInt32(), Int(bodyLength) == reader.remaining
            else { return nil }
            return InboxEntry(
                id: id, kind: kind, schemaVersion: Int(schema), sequence: sequence, payload: buffer,
                bodyRange: range.lowerBound + reader.offset..<range.upperBound, sharedRange: sharedRange)
        default:
            return nil
        }
    }
}

/// Reads little-endian fields in place from bytes that may be a secret's plaintext.
///
/// Nothing is copied but the fields asked for.
private struct RawReader {
    let bytes: UnsafeRawBufferPointer
    private(set) var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }

    mutating func read(_ count: Int) -> UnsafeRawBufferPointer? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    mutating func readUInt8() -> UInt8? { read(1)?.first }

    mutating func readUInt32() -> UInt32? {
        guard let field = read(4) else { return nil }
        return field.reversed().reduce(0) { ($0 << 8) | UInt32($1) }
    }

    mutating func readUInt64() -> UInt64? {
        guard let field = read(8) else { return nil }
        return field.reversed().reduce(0) { ($0 << 8) | UInt64($1) }
    }

    /// A u32 length and that many bytes of valid UTF-8.
    mutating func readText() -> String? {
        guard let length = readUInt32(), let text = read(Int(length)) else { return nil }
        return String(validating: text, as: UTF8.self)
    }
}
