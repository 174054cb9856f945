/// One write made while the store could not be opened.
public struct InboxEntry: Sendable, Hashable {
    /// What the write does.
    public enum Change: Sendable, Hashable {
        /// Store `value` under `key`, replacing what was there.
        case put(key: String, value: String)
        /// Remove `key`.
        case delete(key: String)
    }

    /// A unique identifier, recorded in the store when the entry is applied, so it is never applied twice.
    public let id: [UInt8]
    /// What the write does.
    public let change: Change

    /// An entry with a known identifier (as read back from a record).
    ///
    /// - Parameters:
    ///   - id: the entry's 16-byte identifier.
    ///   - change: what it does.
    public init(id: [UInt8], change: Change) {
        self.id = id
        self.change = change
    }

    /// A new entry with a fresh random identifier.
    public init(_ change: Change, random: any RandomSource = SystemRandom()) {
        self.init(id: random.bytes(count: InboxRecord.idLength), change: change)
    }
}

/// The inbox file's record format (v1, keys/README.md): each record is framed as
/// `"PSIR" ‖ u32 length ‖ crypto_box_seal(payload) ‖ BLAKE2b-128 checksum`, appended in arrival order.
public enum InboxRecord: Sendable {
    /// The four bytes each record starts with (`PSIR`).
    public static let magic: [UInt8] = Array("PSIR".utf8)
    /// The payload version this code writes.
    public static let payloadVersion: UInt8 = 1
    /// The length of an entry's identifier, in bytes.
    public static let idLength = 16
    static let headerLength = 8
    static let checksumLength = 16
    /// The largest sealed payload a record may hold.
    public static let maximumSealedLength = 1 << 20

    /// A record found in an inbox file: where it starts and its sealed bytes.
    public struct Frame: Sendable, Hashable {
        /// Where the record starts in the file.
        public let offset: Int
        /// The sealed payload (`crypto_box_seal` output).
        public let sealed: [UInt8]
    }

    /// Something wrong in an inbox file, reported, never taken for data.
    public enum Problem: Sendable, Hashable, CustomStringConvertible {
        /// The file ends inside a record: a crash during an append. Ignored.
        case tornTail(offset: Int, length: Int)
        /// A complete record that fails its checksum, does not open with the inbox key, or holds no valid
        /// payload. Skipped; the records after it are still read.
        case rejected(offset: Int, reason: String)

        /// The problem in words, with the record's offset.
        public var description: String {
            switch self {
            case .tornTail(let offset, let length): "torn record at byte \(offset) (\(length) bytes, an interrupted append): ignored"
            case .rejected(let offset, let reason): "record at byte \(offset) rejected: \(reason)"
            }
        }
    }

    /// Seals `entry` to `publicKey` and frames it, ready to append.
    public static func seal(_ entry: InboxEntry, to publicKey: [UInt8]) throws -> [UInt8] {
        let payload = try encode(entry)
        defer { payload.wipe() }
        let sealed = try payload.withUnsafeBytes { try SealedBox.seal($0, to: publicKey) }
        var record = ByteWriter()
        record.write(magic)
        record.write(UInt32(sealed.count))
        record.write(sealed)
        record.write(KeyDerivation.checksum(of: record.bytes[...], length: checksumLength))
        return record.bytes
    }

    /// Splits an inbox file into records without opening them (no key needed).
    public static func scan(_ bytes: [UInt8]) -> (frames: [Frame], problems: [Problem]) {
        var frames: [Frame] = []
        var problems: [Problem] = []
        var offset = 0
        while offset < bytes.count {
            let remaining = bytes.count - offset
            guard remaining >= headerLength, Array(bytes[offset..<offset + 4]) == magic else {
                if remaining < headerLength && magic.starts(with: bytes[offset...].prefix(4)) {
                    problems.append(.tornTail(offset: offset, length: remaining))
                    break
                }
                // Not at a record: find the next one, so one damaged record does not hide the rest.
                let next = nextMagic(in: bytes, after: offset)
                problems.append(.rejected(offset: offset, reason: "\((next ?? bytes.count) - offset) bytes that are not a record"))
                guard let next else { break }
                offset = next
                continue
            }
            var reader = ByteReader(bytes, offset: offset + 4)
            let length = Int(reader.readUInt32()!)
            let total = headerLength + length + checksumLength
            guard length <= maximumSealedLength, total <= remaining else {
                if length <= maximumSealedLength { problems.append(.tornTail(offset: offset, length: remaining)); break }
                let next = nextMagic(in: bytes, after: offset)
                problems.append(.rejected(offset: offset, reason: "a length of \(length) bytes is not plausible"))
                guard let next else { break }
                offset = next
                continue
            }
            let body = bytes[offset..<offset + headerLength + length]
            let checksum = Array(bytes[body.endIndex..<body.endIndex + checksumLength])
            if KeyDerivation.constantTimeEquals(KeyDerivation.checksum(of: body, length: checksumLength), checksum) {
                frames.append(Frame(offset: offset, sealed: Array(bytes[offset + headerLength..<offset + headerLength + length])))
            } else {
                problems.append(.rejected(offset: offset, reason: "checksum mismatch (the record was altered)"))
            }
            offset += total
        }
        return (frames, problems)
    }

    /// Opens a record with the inbox key pair.
    ///
    /// - Throws: ``SecureKeysError/Code/damaged`` when it does not open or holds no valid payload.
    public static func open(_ frame: Frame, publicKey: [UInt8], privateKey: SecureBytes) throws -> InboxEntry {
        guard let payload = try SealedBox.open(frame.sealed[...], publicKey: publicKey, privateKey: privateKey) else {
            throw SecureKeysError.damaged("inbox record at byte \(frame.offset) does not open with this store's inbox key")
        }
        defer { payload.wipe() }
        guard let entry = try payload.withUnsafeBytes({ decode(Array($0)) }) else {
            throw SecureKeysError.damaged("inbox record at byte \(frame.offset) holds no valid payload")
        }
        return entry
    }

    // MARK: Payload

    /// version ‖ id(16) ‖ kind ‖ u32 key length ‖ key ‖ [u32 value length ‖ value], built in guarded memory.
    static func encode(_ entry: InboxEntry) throws -> SecureBytes {
        precondition(entry.id.count == idLength, "inbox entry ids are \(idLength) bytes")
        let (kind, key, value): (UInt8, String, String?) =
            switch entry.change {
            case .put(let key, let value): (1, key, value)
            case .delete(let key): (2, key, nil)
            }
        let keyBytes = Array(key.utf8)
        let valueBytes = value.map { Array($0.utf8) }
        var writer = ByteWriter()
        writer.write(payloadVersion)
        writer.write(entry.id)
        writer.write(kind)
        writer.write(UInt32(keyBytes.count))
        writer.write(keyBytes)
        if let valueBytes {
            writer.write(UInt32(valueBytes.count))
            writer.write(valueBytes)
        }
        var bytes = writer.bytes
        defer { secureZero(&bytes) }
        return bytes.withUnsafeBytes { SecureBytes(copying: $0) }
    }

    static func decode(_ bytes: [UInt8]) -> InboxEntry? {
        var reader = ByteReader(bytes)
        guard reader.readUInt8() == payloadVersion, let id = reader.read(idLength), let kind = reader.readUInt8(),
            let keyLength = reader.readUInt32(), let keyBytes = reader.read(Int(keyLength)),
            let key = String(validating: keyBytes, as: UTF8.self)
        else { return nil }
        switch kind {
        case 1:
            guard let valueLength = reader.readUInt32(), let valueBytes = reader.read(Int(valueLength)),
                let value = String(validating: valueBytes, as: UTF8.self), reader.remaining == 0
            else { return nil }
            return InboxEntry(id: Array(id), change: .put(key: key, value: value))
        case 2:
            guard reader.remaining == 0 else { return nil }
            return InboxEntry(id: Array(id), change: .delete(key: key))
        default:
            return nil
        }
    }

    private static func nextMagic(in bytes: [UInt8], after offset: Int) -> Int? {
        var index = offset + 1
        while index + magic.count <= bytes.count {
            if bytes[index] == magic[0] && Array(bytes[index..<index + magic.count]) == magic { return index }
            index += 1
        }
        return nil
    }
}
