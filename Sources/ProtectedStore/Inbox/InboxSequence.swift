internal import DiskModel
internal import SecureKeys

/// The base of the locked inbox's sequence numbers.
///
/// It is kept in `<store>.inbox-sequence` (<doc:/SecureKeys/KeyFileFormats>), and is the replay
/// protection of the inbox.
///
/// An append, under the inbox's lock, gives each record the sequence `base + its offset in the inbox + 1`,
/// sealed inside the payload (version 3): strictly increasing in the file, with no write of its own (the
/// append reads the base, and the inbox's own `fsync` makes the record durable). A merge, under the same
/// lock, raises the base past every sequence it saw before it truncates the inbox, so sequences keep
/// increasing across merges; the store remembers the highest it merged, and a record whose sequence is not
/// above it — an old sealed record appended again — is a replay: quarantined, never applied.
///
/// The file is not secret and not authenticated. Whoever can write it can lower the base, which makes new
/// records look like replays (they are quarantined, visible, not lost: a denial of service), but cannot make an
/// old record apply: the store's highest merged sequence lives in the encrypted store.
///
/// Format: magic `PSIQ` (4) ‖ u64 base ‖ `H16` of the first 12 bytes (16).
enum InboxSequence {
    static let magic: [UInt8] = Array("PSIQ".utf8)
    static let length = 4 + 8 + 16

    /// The base in the file at `path`.
    ///
    /// 0 when there is none (a store that has not merged a record yet).
    ///
    /// - Throws: `StoreError.Code.inboxUnusable` when the file is damaged (an append must not guess: a
    ///   lower base would make its records look like replays); the next merge writes it again.
    static func base(at path: String) throws -> UInt64 {
        guard SecureFile.exists(path) else { return 0 }
        let bytes: [UInt8]
        do {
            bytes = try SecureFile.read(path, maximumSize: 4096)
        } catch {
            throw StoreError.inboxUnusable(path: path, reason: "not a readable sequence file (\(StoreError(wrapping: error).message))")
        }
        var reader = ByteReader(bytes)
        guard bytes.count == length, reader.read(4).map(Array.init) == magic, let base = reader.readUInt64(),
            KeyDerivation.constantTimeEquals(KeyDerivation.checksum(of: bytes[..<12], length: 16), Array(bytes[12...]))
        else {
            throw StoreError.inboxUnusable(
                path: path, reason: "a damaged sequence file (\(bytes.count) bytes, checksum or magic wrong); the store's next merge writes it again")
        }
        return base
    }

    /// Replaces the file at `path` with `base`, atomically (temporary file, `fsync`, `rename`, folder `fsync`).
    static func write(_ base: UInt64, to path: String, in fileSystem: FileSystem) throws {
        var writer = ByteWriter()
        writer.write(magic)
        writer.write(base)
        writer.write(KeyDerivation.checksum(of: writer.bytes[...], length: 16))
        try SecureFile.writeAtomically(writer.bytes, to: path, replacing: true, in: fileSystem)
    }
}
