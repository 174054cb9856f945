/// The inbox file's record format.
///
/// Each record is framed as `"PSIR" ‖ u32 length ‖ crypto_box_seal(payload) ‖ BLAKE2b-128 checksum`, appended in
/// arrival order (<doc:KeyFileFormats>).
///
/// This layer seals, frames, finds and opens records; what a payload holds (an entry's id, kind, schema
/// version and body) is the store layer's business (`InboxEntry` in ProtectedStore).
public enum InboxRecord: Sendable {
    /// The four bytes each record starts with (`PSIR`).
    public static let magic: [UInt8] = Array("PSIR".utf8)
    package static let headerLength = 8
    package static let checksumLength = 16
    /// The largest payload a record may hold, 4 MiB (4,194,304 bytes).
    ///
    /// An append of a larger one is refused before anything is written; a merge never meets one.
    public static let maximumPayloadLength = 4 << 20
    /// The largest sealed payload a record may hold.
    ///
    /// It is the payload limit plus the sealed box's overhead.
    public static let maximumSealedLength = maximumPayloadLength + SealedBox.overhead

    /// A record found in an inbox file, with where it starts and its sealed bytes.
    public struct Frame: Sendable, Hashable {
        /// Where the record starts in the file.
        public let offset: Int
        /// The sealed payload (`crypto_box_seal` output).
        public let sealed: [UInt8]
        /// Whether the record's checksum verified.
        ///
        /// `false` for a record whose checksum failed but whose bytes are where its length says
        /// (``Piece/record(offset:sealedLength:checksumVerified:)``). Only its seal, which is authenticated, can
        /// tell whether it is intact.
        public let checksumVerified: Bool

        /// A record at `offset` holding `sealed`.
        package init(offset: Int, sealed: [UInt8], checksumVerified: Bool = true) {
            self.offset = offset
            self.sealed = sealed
            self.checksumVerified = checksumVerified
        }
    }

    /// Something wrong in an inbox file, reported, never taken for data.
    public enum Problem: Sendable, Hashable, CustomStringConvertible {
        /// The file ended inside a record and no intact record followed.
        ///
        /// It is an append cut short, never acknowledged, as an acknowledged append was complete and synced. Its
        /// bytes were moved to the damaged-bytes file (`<store>.inbox-damaged`), never dropped.
        case tornTail(offset: Int, length: Int)
        /// A record whose checksum fails, with its bytes where its length says.
        ///
        /// It is applied when its seal still authenticates (the damage was in the frame), and quarantined
        /// otherwise. It is never dropped.
        case checksumMismatch(offset: Int, length: Int)
        /// Bytes that are not a record.
        ///
        /// They are moved to the damaged-bytes file, never read as data.
        case damaged(offset: Int, length: Int, reason: String)
        /// The inbox itself cannot be used.
        ///
        /// It is not a regular file, is unreadable, or its damaged bytes cannot be moved aside. It was left as it
        /// is, for inspection, and nothing in it was dropped.
        case unusable(String)

        /// The problem in words, with the record's offset.
        public var description: String {
            switch self {
            case .tornTail(let offset, let length):
                "torn record at byte \(offset) (\(length) bytes, an interrupted append, never acknowledged): moved to the damaged-bytes file"
            case .checksumMismatch(let offset, let length):
                "record at byte \(offset) (\(length) bytes) fails its checksum: applied only if its seal still authenticates, quarantined otherwise"
            case .damaged(let offset, let length, let reason):
                "\(length) bytes at byte \(offset) are not a record (\(reason)): moved to the damaged-bytes file"
            case .unusable(let reason):
                "the inbox cannot be merged: \(reason); it was left as it is"
            }
        }
    }

    /// Seals `payload` to `publicKey` and frames it, ready to append.
    ///
    /// - Parameters:
    ///   - payload: the plaintext, in guarded memory; at most ``maximumPayloadLength`` bytes.
    ///   - publicKey: the store's inbox public key.
    /// - Returns: the framed record.
    /// - Throws: `SecureKeysError.Code.invalidArgument` for a payload over the limit or a bad public key.
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
    ///
    /// It follows the inbox layout's rules (<doc:KeyFileFormats>), resynchronising at every
    /// `PSIR` whose record verifies.
    ///
    /// - Returns: every record (those whose checksum failed with `checksumVerified == false`), and a problem
    ///   for each piece that is not an intact record.
    public static func scan(_ bytes: [UInt8]) -> (frames: [Frame], problems: [Problem]) {
        var frames: [Frame] = []
        var problems: [Problem] = []
        // Reading from memory cannot fail.
        for piece in (try? layout(of: InboxBytesInMemory(bytes))) ?? [] {
            switch piece {
            case .record(let offset, let sealedLength, let verified):
                frames.append(Frame(offset: offset, sealed: Array(bytes[offset + headerLength..<offset + headerLength + sealedLength]), checksumVerified: verified))
                if !verified { problems.append(.checksumMismatch(offset: offset, length: piece.length)) }
            case .damaged(let offset, let length, let reason):
                problems.append(.damaged(offset: offset, length: length, reason: reason))
            case .tornTail(let offset, let length):
                problems.append(.tornTail(offset: offset, length: length))
            }
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
    /// - Throws: `SecureKeysError.Code.keyFileDamaged` when it does not open with this key pair.
    public static func open(_ frame: Frame, publicKey: [UInt8], privateKey: SecureBytes) throws -> SecureBytes {
        guard let payload = try SealedBox.open(frame.sealed[...], publicKey: publicKey, privateKey: privateKey) else {
            throw SecureKeysError.damaged("inbox record at byte \(frame.offset) does not open with this store's inbox key")
        }
        return payload
    }
}
