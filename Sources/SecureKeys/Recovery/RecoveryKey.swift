package import DiskModel
internal import Glibc

/// The public half of a recovery key, and how to derive it again from the phrase.
///
/// A device keeps it so that it can seal backups without ever holding the phrase (or anything that opens them).
///
/// The key pair is `crypto_box_seed_keypair(Argon2id(phrase bytes, salt, kdf))` (``RecoveryPhrase``); the
/// device keeps the public key with the salt and the Argon2id cost, in the recovery key file (`<store>.recovery-key`,
/// 88 bytes, <doc:KeyFileFormats> "Recovery key file"), none of it secret. Only a restore derives the private key, from
/// the phrase the user types.
public struct RecoveryKey: Sendable, Hashable {
    /// The format this type writes and reads.
    public static let formatVersion: UInt8 = 1
    /// The magic bytes a recovery key file starts with.
    public static let magic: [UInt8] = Array("PSRK".utf8)
    /// The length of a recovery key file.
    public static let fileLength = 88
    /// The Argon2id cost of a new recovery key.
    ///
    /// It is libsodium's MODERATE level (3 passes, 256 MiB). A restore is rare, and the cost is what an attacker
    /// holding a backup pays per guess on top of the phrase's 128 bits.
    public static let defaultKDF = PasscodeKDF(opsLimit: 3, memLimit: 256 << 20)
    /// Whether `kdf` is a cost a recovery key is made with.
    ///
    /// Such a cost is from `PasscodeKDF.minimal` (tests) up to ``defaultKDF``, in passes and in memory. A
    /// recovery key file or a backup header recording a cost outside it was not written by this code, and is
    /// refused before any derivation. The header's checksum is no authentication, and a cost of 2^32-1 passes
    /// would have a restore derive for hours.
    public static func isWrittenCost(_ kdf: PasscodeKDF) -> Bool {
        kdf.isValid && (PasscodeKDF.minimal.opsLimit...defaultKDF.opsLimit).contains(kdf.opsLimit)
            && (PasscodeKDF.minimal.memLimit...defaultKDF.memLimit).contains(kdf.memLimit)
    }

    /// The KDF algorithm identifier recorded in files.
    ///
    /// It is `2`, Argon2id v1.3 (as in the keybag).
    static let kdfAlgorithm: UInt8 = 2

    /// The Argon2id cost the phrase is derived with.
    public let kdf: PasscodeKDF
    /// The Argon2id salt (16 bytes).
    public let salt: [UInt8]
    /// The X25519 public key backups are sealed to (32 bytes).
    public let publicKey: [UInt8]

    /// A recovery key from its parts.
    ///
    /// - Throws: `SecureKeysError.Code.invalidArgument` for a salt or key of the wrong length, or a cost
    ///   outside what a recovery key is made with (``isWrittenCost(_:)``).
    public init(kdf: PasscodeKDF, salt: [UInt8], publicKey: [UInt8]) throws {
        guard salt.count == PasscodeKDF.saltLength, publicKey.count == SealedBox.publicKeyLength, Self.isWrittenCost(kdf) else {
            throw SecureKeysError.invalidArgument(
                "a recovery key has a \(PasscodeKDF.saltLength)-byte salt, a \(SealedBox.publicKeyLength)-byte public key and an Argon2id cost from \(PasscodeKDF.minimal.opsLimit) to \(Self.defaultKDF.opsLimit) passes and \(PasscodeKDF.minimal.memLimit >> 10) KiB to \(Self.defaultKDF.memLimit >> 20) MiB")
        }
        self.kdf = kdf
        self.salt = salt
        self.publicKey = publicKey
    }

    /// Makes a new recovery phrase and its recovery key.
    ///
    /// Show the phrase to the user once, and keep the key.
    ///
    /// - Parameters:
    ///   - kdf: the Argon2id cost (``defaultKDF``; `PasscodeKDF.minimal` only in tests).
    ///   - random: where the phrase and the salt come from.
    /// - Throws: `SecureKeysError.Code.invalidArgument`, `SecureKeysError.Code.outOfMemory`.
    public static func create(
        kdf: PasscodeKDF = defaultKDF, random: any RandomSource = SystemRandom()
    ) throws -> (phrase: RecoveryPhrase, key: RecoveryKey) {
        let phrase = try RecoveryPhrase.generate(random: random)
        let salt = random.bytes(count: PasscodeKDF.saltLength)
        let (publicKey, privateKey) = try phrase.deriveKeyPair(kdf: kdf, salt: salt)
        privateKey.wipe()
        return (phrase, try RecoveryKey(kdf: kdf, salt: salt, publicKey: publicKey))
    }

    /// The private key `phrase` derives, checked against ``publicKey``.
    ///
    /// - Returns: the X25519 private key, in guarded memory.
    /// - Throws: `SecureKeysError.Code.wrongRecoveryPhrase` when the phrase derives another key pair.
    public func privateKey(for phrase: RecoveryPhrase) throws -> SecureBytes {
        let (derived, privateKey) = try phrase.deriveKeyPair(kdf: kdf, salt: salt)
        guard KeyDerivation.constantTimeEquals(derived, publicKey) else {
            privateKey.wipe()
            throw SecureKeysError(
                code: .wrongRecoveryPhrase,
                message: "the recovery phrase is well formed but is not the one this backup was sealed to (its recovery key is \(fingerprint))")
        }
        return privateKey
    }

    /// A short, public name of the key to compare by eye.
    ///
    /// It is the first 8 bytes of `H16(public key)` in hex.
    public var fingerprint: String {
        KeyDerivation.checksum(of: publicKey[...], length: 16).prefix(8).map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
        }.joined()
    }

    // MARK: The file

    /// The recovery key file's bytes.
    ///
    /// They are magic, version, KDF algorithm, reserved, opslimit, memlimit, salt, public key, checksum `H16`
    /// (<doc:KeyFileFormats>).
    public var fileBytes: [UInt8] {
        var writer = ByteWriter()
        writeFields(to: &writer)
        ChecksummedFile.seal(&writer)
        return writer.bytes
    }

    /// Writes the KDF algorithm, the cost, the salt and the public key.
    ///
    /// They are 72 bytes after the magic and version, as the file and the backup header both hold them.
    func writeParameters(to writer: inout ByteWriter) {
        writer.write(Self.kdfAlgorithm)
        writer.write(UInt16(0))
        writer.write(kdf.opsLimit)
        writer.write(kdf.memLimit)
        writer.write(salt)
        writer.write(publicKey)
    }

    private func writeFields(to writer: inout ByteWriter) {
        writer.write(Self.magic)
        writer.write(Self.formatVersion)
        writeParameters(to: &writer)
    }

    /// Reads the parameters ``writeParameters(to:)`` wrote.
    ///
    /// - Throws: `damaged` (built by the caller, for its kind of file) for an unknown KDF or a cost or key out of range.
    static func readParameters(
        from reader: inout ByteReader, damaged: (String) -> SecureKeysError
    ) throws -> RecoveryKey {
        guard reader.readUInt8() == kdfAlgorithm else { throw damaged("the KDF is not Argon2id") }
        _ = reader.readUInt16()
        let kdf = PasscodeKDF(opsLimit: reader.readUInt64()!, memLimit: reader.readUInt64()!)
        let salt = Array(reader.read(PasscodeKDF.saltLength)!)
        let publicKey = Array(reader.read(SealedBox.publicKeyLength)!)
        guard isWrittenCost(kdf) else {
            throw damaged(
                "its Argon2id cost is outside what a recovery key is made with (opslimit \(kdf.opsLimit), memlimit \(kdf.memLimit); at most \(defaultKDF.opsLimit) and \(defaultKDF.memLimit))")
        }
        return try RecoveryKey(kdf: kdf, salt: salt, publicKey: publicKey)
    }

    /// Parses a recovery key file.
    ///
    /// - Throws: `SecureKeysError.Code.keyFileDamaged` (length, magic, checksum, values),
    ///   `SecureKeysError.Code.unsupportedBackupFormat` for another version.
    public init(fileBytes bytes: [UInt8], path: String? = nil) throws {
        if bytes.count > Self.magic.count, Array(bytes[0..<Self.magic.count]) == Self.magic,
            bytes[Self.magic.count] != Self.formatVersion
        {
            throw SecureKeysError(
                code: .unsupportedBackupFormat,
                message: "recovery key file version \(bytes[Self.magic.count]); this build reads version \(Self.formatVersion)",
                path: path)
        }
        try ChecksummedFile.verify(
            bytes, kind: "recovery key file", magic: Self.magic, version: Self.formatVersion, length: Self.fileLength,
            path: path)
        var reader = ByteReader(bytes, offset: Self.magic.count + 1)
        self = try Self.readParameters(from: &reader) { SecureKeysError.damaged("recovery key file: \($0)", path: path) }
    }

    /// Reads the recovery key file at `path` (refusing links and files other users can read or write).
    ///
    /// - Throws: as ``init(fileBytes:path:)``, and `SecureKeysError.Code.ioError` when it cannot be read.
    public static func load(from path: String) throws -> RecoveryKey {
        try RecoveryKey(fileBytes: try SecureFile.read(path, maximumSize: 4096), path: path)
    }

    /// Writes the recovery key file at `path` (mode 0600, atomically, its folder synced).
    ///
    /// An existing one is never overwritten.
    ///
    /// - Throws: `SecureKeysError.Code.alreadyExists`, `SecureKeysError.Code.ioError`.
    public func write(to path: String) throws {
        try write(to: path, in: .real)
    }

    /// Writes the recovery key file at `path` in `fileSystem`, as ``write(to:)`` does.
    package func write(to path: String, in fileSystem: FileSystem) throws {
        try SecureFile.writeAtomically(fileBytes, to: path, replacing: false, in: fileSystem)
    }

    /// Where a store's recovery key file is, `<store>.recovery-key`.
    public static func path(forStoreAt storePath: String) -> String { storePath + ".recovery-key" }
}
