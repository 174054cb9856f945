/// The inbox key pair of a store.
///
/// The format is v1 (<doc:KeyFileFormats>). The X25519 public key is in the clear, so records
/// can be sealed while the device is locked. The private key is wrapped by a key derived from the store key, so
/// it opens exactly when the store itself can be opened.
public struct InboxKeyFile: Sendable {
    /// The format version this code writes.
    ///
    /// See <doc:KeyFileFormats>.
    public static let formatVersion: UInt8 = 1
    /// The four bytes an inbox key file starts with.
    public static let magic: [UInt8] = Array("PSIK".utf8)
    static let headerLength = 8 + SealedBox.publicKeyLength
    static let wrappedKeyLength = KeyWrap.wrappedLength(secretLength: SealedBox.privateKeyLength)
    static let checksumLength = ChecksummedFile.checksumLength
    /// The length of every v1 inbox key file.
    public static let fileLength = headerLength + wrappedKeyLength + checksumLength
    static let wrappingLabel = "ProtectedStore.inbox-key.wrap.v1"

    /// The file's bytes, exactly as written to disk.
    public let bytes: [UInt8]
    /// The public key records are sealed to.
    public let publicKey: [UInt8]

    /// Parses an inbox key file and checks its checksum.
    ///
    /// No key is needed, so it works while locked.
    ///
    /// - Throws: `SecureKeysError.Code.keyFileDamaged` or `SecureKeysError.Code.unsupportedKeyFormat`.
    public init(bytes: [UInt8], path: String? = nil) throws {
        try ChecksummedFile.verify(
            bytes, kind: "inbox key file", magic: Self.magic, version: Self.formatVersion, length: Self.fileLength, path: path)
        self.bytes = bytes
        self.publicKey = Array(bytes[8..<Self.headerLength])
    }

    /// Reads and checks the inbox key file at `path`.
    public static func load(from path: String) throws -> InboxKeyFile {
        try InboxKeyFile(bytes: try SecureFile.read(path, maximumSize: 64 << 10), path: path)
    }

    /// Makes a new inbox key pair and its file image (nothing is written).
    public static func make(storeKey: SecureBytes, random: any RandomSource = SystemRandom()) throws -> (file: InboxKeyFile, privateKey: SecureBytes) {
        let pair = try SealedBox.makeKeyPair(random: random)
        var header = ByteWriter()
        header.write(magic)
        header.write(formatVersion)
        header.write([UInt8](repeating: 0, count: 3))
        header.write(pair.publicKey)
        let wrappingKey = try KeyDerivation.derive(label: wrappingLabel, from: storeKey)
        defer { wrappingKey.wipe() }
        var file = ByteWriter()
        file.write(header.bytes)
        file.write(try KeyWrap.wrap(pair.privateKey, with: wrappingKey, associatedData: header.bytes, random: random))
        ChecksummedFile.seal(&file)
        return (try InboxKeyFile(bytes: file.bytes), pair.privateKey)
    }

    /// Unwraps the private key with the store key.
    ///
    /// - Throws: `SecureKeysError.Code.wrongDevice` when the store key does not open it (the file belongs
    ///   to another store).
    public func unwrapPrivateKey(storeKey: SecureBytes, path: String? = nil) throws -> SecureBytes {
        let wrappingKey = try KeyDerivation.derive(label: Self.wrappingLabel, from: storeKey)
        defer { wrappingKey.wipe() }
        let wrapped = bytes[Self.headerLength..<(Self.headerLength + Self.wrappedKeyLength)]
        guard let key = try KeyWrap.unwrap(wrapped, with: wrappingKey, associatedData: Array(bytes[..<Self.headerLength])) else {
            throw SecureKeysError(
                code: .wrongDevice, message: "the inbox key does not unwrap with this store's key (the file belongs to another store)",
                path: path)
        }
        return key
    }
}
