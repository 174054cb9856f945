/// The inbox file's record format (keys/README.md): each record is framed as
/// `"PSIR" ‖ u32 length ‖ crypto_box_seal(payload) ‖ BLAKE2b-128 checksum`, appended in arrival order.
///
/// This layer seals, frames, finds and opens records; what a payload holds (an entry's id, kind, schema
/// version and body) is the store layer's business (`InboxEntry` in ProtectedStore).
public enum InboxRecord: Sendable {
    /// The four bytes each record starts with (`PSIR`).
    public static let magic: [UInt8] = Array("PSIR".utf8)
    static let headerLength = 8
    static let checksumLength = 16
    /// The largest payload a record may hold: 4 MiB (4,194,304 bytes). An append of a larger one is refused
    /// before anything is written; a merge never meets one.
    public static let maximumPayloadLength = 4 << 20
    /// The largest sealed payload a record may hold: the payload limit plus the sealed box's overhead.
    public static let maximumSealedLength = maximumPayloadLength + SealedBox.overhead

    /// A record found in an inbox file: where it starts and its sealed bytes.
    public struct Frame: Sendable, Hashable {
        /// Where the record starts in the file.
        public let offset: Int
        /// The sealed payload (`crypto_box_seal` output).
        public let sealed: [UInt8]

        /// A record at `offset` holding `sealed`.
        package init(offset: Int, sealed: [UInt8]) {
            self.offset = offset
            self.sealed = sealed
        }
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

    /// Seals `payload` to `publicKey` and frames it, ready to append.
    ///
    /// - Parameters:
    ///   - payload: the plaintext, in guarded memory; at most ``maximumPayloadLength`` bytes.
    ///   - publicKey: the store's inbox public key.
    /// - Returns: the framed record.
    /// - Throws: ``SecureKeysError/Code/invalidArgument`` for a payload over the limit or a bad public key.
    public static func seal(_ payload: SecureBytes, to publicKey: [UInt8]) throws -> [UInt8] {
        guard payload.count <= maximumPayloadLength else {
            throw SecureKeysError.invalidArgument(
                "an inbox record holds at most \(maximumPayloadLength) bytes of payload; this one is \(payload.count)")
        }
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
    /// - Parameters:
    ///   - frame: a record found by ``scan(_:)``.
    ///   - publicKey: the inbox public key.
    ///   - privateKey: the inbox private key.
    /// - Returns: the payload, in guarded memory.
    /// - Throws: ``SecureKeysError/Code/damaged`` when it does not open with this key pair.
    public static func open(_ frame: Frame, publicKey: [UInt8], privateKey: SecureBytes) throws -> SecureBytes {
        guard let payload = try SealedBox.open(frame.sealed[...], publicKey: publicKey, privateKey: privateKey) else {
            throw SecureKeysError.damaged("inbox record at byte \(frame.offset) does not open with this store's inbox key")
        }
        return payload
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
