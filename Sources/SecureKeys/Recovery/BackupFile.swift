internal import CSodium

/// The frame of a backup file.
///
/// It is a header that says how to open it, the encrypted database, and an authentication tag over both
/// (<doc:KeyFileFormats>, "Backup file").
///
/// ```
/// header (184 bytes)
/// ‖ database (N bytes: a SQLCipher file in the recorded store format, keyed raw
///   with K_db)
/// ‖ tag (32 bytes: BLAKE2b(K_mac, header ‖ database))
/// ```
///
/// Each backup has its own random 32-byte data key `DK_b`, sealed to the recovery public key
/// (`crypto_box_seal`), so that a device can make backups holding only the public key, and only the phrase
/// opens them. `K_db = BLAKE2b(DK_b, "ProtectedStore.backup.database.v1")` keys the database,
/// `K_mac = BLAKE2b(DK_b, "ProtectedStore.backup.mac.v1")` the tag. A restore verifies the tag over every byte
/// before SQLite reads any of them: an altered or truncated file never reaches the SQL engine.
public struct BackupHeader: Sendable {
    /// The magic bytes a backup file starts with.
    public static let magic: [UInt8] = Array("PSBK".utf8)
    /// The format this type writes and reads.
    public static let formatVersion: UInt8 = 1
    /// The header's length.
    public static let length = 184
    /// The tag's length, at the end of the file.
    public static let tagLength = 32
    /// The data key's length.
    public static let dataKeyLength = 32
    static let sealedKeyLength = dataKeyLength + SealedBox.overhead
    static let databaseLabel = "ProtectedStore.backup.database.v1"
    static let macLabel = "ProtectedStore.backup.mac.v1"

    /// The recovery key the data key is sealed to, with the Argon2id parameters that derive it from the phrase.
    public let recoveryKey: RecoveryKey
    /// The store format the database is written in (`StoreFormat/identifier`).
    public let storeFormat: StoreFormat
    /// The database's length in bytes.
    public let databaseLength: UInt64
    /// `crypto_box_seal(DK_b, recovery public key)`.
    let sealedDataKey: [UInt8]
    /// The header's bytes, as in the file.
    public let bytes: [UInt8]

    /// The length of the whole file.
    public var fileLength: UInt64 { UInt64(Self.length) + databaseLength + UInt64(Self.tagLength) }

    /// A header for a new backup, with `dataKey` sealed to `recoveryKey`.
    ///
    /// `dataKey` is ``dataKeyLength`` random bytes, made by the caller, who keys the database with
    /// ``databaseKey(from:)`` before its length is known.
    ///
    /// - Throws: `SecureKeysError.Code.invalidArgument` for a data key of another length, or a store format no
    ///   file can record.
    public static func make(
        recoveryKey: RecoveryKey, storeFormat: StoreFormat, databaseLength: UInt64, dataKey: SecureBytes
    ) throws -> BackupHeader {
        guard dataKey.count == dataKeyLength, storeFormat.identifier != 0 else {
            throw SecureKeysError.invalidArgument("a backup's data key is \(dataKeyLength) bytes and its store format one a file records")
        }
        let sealed = try dataKey.withUnsafeBytes { try SealedBox.seal($0, to: recoveryKey.publicKey) }
        var writer = ByteWriter()
        writer.write(magic)
        writer.write(formatVersion)
        recoveryKey.writeParameters(to: &writer)
        writer.write(storeFormat.identifier)
        writer.write([UInt8](repeating: 0, count: 7))
        writer.write(databaseLength)
        writer.write(sealed)
        ChecksummedFile.seal(&writer)
        return try BackupHeader(bytes: writer.bytes, fileLength: nil)
    }

    /// Parses a header and checks it against the file's length.
    ///
    /// - Parameters:
    ///   - bytes: the file's first ``length`` bytes (or fewer, for a file that short).
    ///   - fileLength: the whole file's length, checked against the database length the header records.
    ///   - path: the file, named in errors.
    /// - Throws: `SecureKeysError.Code.backupDamaged` (not a backup, truncated, checksum, values),
    ///   `SecureKeysError.Code.unsupportedBackupFormat` for a version or store format this build does not read.
    public init(bytes: [UInt8], fileLength: UInt64?, path: String? = nil) throws {
        func damaged(_ what: String) -> SecureKeysError {
            SecureKeysError(code: .backupDamaged, message: "the backup is damaged: \(what); nothing was restored", path: path)
        }
        guard bytes.count >= Self.magic.count + 1, Array(bytes[0..<Self.magic.count]) == Self.magic else {
            throw damaged("it does not start like a backup file (bad magic)")
        }
        guard bytes[Self.magic.count] == Self.formatVersion else {
            throw SecureKeysError(
                code: .unsupportedBackupFormat,
                message: "backup file version \(bytes[Self.magic.count]); this build reads version \(Self.formatVersion)", path: path)
        }
        guard bytes.count >= Self.length else {
            throw damaged("it is \(fileLength ?? UInt64(bytes.count)) bytes, shorter than a backup header (\(Self.length))")
        }
        let header = Array(bytes[0..<Self.length])
        let body = header[..<(Self.length - ChecksummedFile.checksumLength)]
        guard KeyDerivation.constantTimeEquals(
            KeyDerivation.checksum(of: body, length: ChecksummedFile.checksumLength), Array(header[body.endIndex...]))
        else { throw damaged("its header checksum does not match (altered)") }
        var reader = ByteReader(header, offset: Self.magic.count + 1)
        recoveryKey = try RecoveryKey.readParameters(from: &reader) { damaged("its header \($0)") }
        let identifier = reader.readUInt8()!
        guard let format = StoreFormat(recordedIdentifier: identifier) else {
            throw SecureKeysError(
                code: .unsupportedBackupFormat,
                message: "the backup's database is in store format \(identifier), which this build cannot open", path: path)
        }
        storeFormat = format
        _ = reader.read(7)
        databaseLength = reader.readUInt64()!
        sealedDataKey = Array(reader.read(Self.sealedKeyLength)!)
        self.bytes = header
        if let fileLength {
            let expected = UInt64(Self.length) + databaseLength + UInt64(Self.tagLength)
            guard databaseLength > 0, databaseLength < UInt64(Int64.max) / 2, fileLength == expected else {
                throw damaged(
                    fileLength < expected
                        ? "it is \(fileLength) bytes, its header says \(expected) (truncated)"
                        : "it is \(fileLength) bytes, its header says \(expected)")
            }
        }
    }

    /// Opens the data key with the recovery private key.
    ///
    /// - Throws: `SecureKeysError.Code.backupDamaged` when the sealed key does not open: the private key was
    ///   checked against the header's public key, so the seal was altered.
    public func openDataKey(privateKey: SecureBytes, path: String? = nil) throws -> SecureBytes {
        guard let key = try SealedBox.open(sealedDataKey[...], publicKey: recoveryKey.publicKey, privateKey: privateKey),
            key.count == Self.dataKeyLength
        else {
            throw SecureKeysError(
                code: .backupDamaged, message: "the backup is damaged: its sealed data key does not open with the recovery key; nothing was restored",
                path: path)
        }
        return key
    }

    /// `K_db`, the database's key.
    public static func databaseKey(from dataKey: SecureBytes) throws -> SecureBytes {
        try KeyDerivation.derive(label: databaseLabel, from: dataKey)
    }

    /// `K_mac`, the tag's key.
    public static func macKey(from dataKey: SecureBytes) throws -> SecureBytes {
        try KeyDerivation.derive(label: macLabel, from: dataKey)
    }
}

/// Keyed BLAKE2b-256 over a stream of bytes (`crypto_generichash_init`/`update`/`final`).
///
/// It computes the backup's tag while the file is written or read, without holding it in memory. Its state (which
/// holds the key) lives in guarded memory.
public final class BackupAuthenticator {
    private let state: SecureBytes

    /// A new computation keyed with `key` (32 bytes).
    public init(key: SecureBytes) throws {
        Sodium.ensureInitialised()
        state = try SecureBytes(count: crypto_generichash_statebytes())
        try key.withUnsafeBytes { keyBytes in
            state.unsafeWithMutableBytes { memory in
                _ = crypto_generichash_init(
                    OpaquePointer(memory.baseAddress!), keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    keyBytes.count, BackupHeader.tagLength)
            }
        }
    }

    deinit { state.wipe() }

    /// Adds `bytes`.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        state.unsafeWithMutableBytes { memory in
            _ = crypto_generichash_update(
                OpaquePointer(memory.baseAddress!), base.assumingMemoryBound(to: UInt8.self), UInt64(bytes.count))
        }
    }

    /// The tag of everything added.
    public func finish() -> [UInt8] {
        var tag = [UInt8](repeating: 0, count: BackupHeader.tagLength)
        state.unsafeWithMutableBytes { memory in
            _ = crypto_generichash_final(OpaquePointer(memory.baseAddress!), &tag, tag.count)
        }
        return tag
    }
}

/// One owner computes a tag at a time.
@available(*, unavailable)
extension BackupAuthenticator: Sendable {}
