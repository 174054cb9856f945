package import DiskModel

/// The key file beside a store.
///
/// It holds the store's 32-byte key, wrapped by its protection class's key, and the store's format. This is
/// format v2, specified byte by byte in <doc:KeyFileFormats>. v1 files, which hold no format, are read as
/// stores of ``StoreFormat/sqlcipher3Raw4096``.
///
/// A checksum over the whole file tells damage (truncation, bit flips) apart from a class key that does not
/// fit (a key file from another device), even while the device is locked and no class key is at hand.
public struct StoreKeyFile: Sendable {
    /// The format this type writes.
    public static let formatVersion: UInt8 = 2
    /// The formats this type reads.
    ///
    /// They are v1 (no store format recorded, so format 1) and v2.
    public static let readableFormatVersions: [UInt8] = [1, 2]
    /// The magic bytes a store key file starts with.
    public static let magic: [UInt8] = Array("PSSK".utf8)
    /// The length of the store identifier.
    public static let storeIDLength = 16
    /// The length of a store key (SQLCipher's raw AES-256 key).
    public static let storeKeyLength = 32

    static let headerLength = 24
    static let wrappedKeyLength = KeyWrap.wrappedLength(secretLength: storeKeyLength)
    static let checksumLength = ChecksummedFile.checksumLength
    /// The length of every store key file (v1 and v2).
    public static let fileLength = headerLength + wrappedKeyLength + checksumLength

    static let wrappingLabel = "ProtectedStore.store-key.wrap.v1"

    /// The file's bytes, exactly as written to disk.
    public let bytes: [UInt8]
    /// The class whose key wraps the store key.
    public let protectionClass: ProtectionClass
    /// A random identifier of the store this key belongs to (not secret).
    public let storeID: [UInt8]
    /// The key file's format version (1 or 2).
    public let version: UInt8
    /// The format of the store file this key opens.
    ///
    /// It is recorded at offset 6 of a v2 file, and is format 1 for a v1 file.
    public let storeFormat: StoreFormat

    /// Parses a store key file and checks its checksum.
    ///
    /// - Throws: `SecureKeysError.Code.keyFileDamaged`, or `SecureKeysError.Code.unsupportedKeyFormat` for a key file
    ///   version or a store format this build does not know.
    public init(bytes: [UInt8], path: String? = nil) throws {
        try ChecksummedFile.verify(
            bytes, kind: "store key file", magic: Self.magic, versions: Self.readableFormatVersions,
            length: Self.fileLength, path: path)
        var reader = ByteReader(bytes, offset: Self.magic.count)
        let version = reader.readUInt8()!
        guard let protectionClass = reader.readUInt8().flatMap(ProtectionClass.init(rawValue:)) else {
            throw SecureKeysError.damaged("unknown protection class", path: path)
        }
        let formatIdentifier = reader.readUInt8()!
        _ = reader.readUInt8()  // reserved
        if version == 1 {
            // Version 1 held two reserved bytes here and knew one store format: the one every store was in.
            storeFormat = .sqlcipher3Raw4096
        } else if let format = StoreFormat(recordedIdentifier: formatIdentifier) {
            storeFormat = format
        } else {
            let known = StoreFormat.recorded.map { "\($0.identifier) (\($0.name))" }.joined(separator: ", ")
            throw SecureKeysError.unsupportedFormat(
                "the store is in format \(formatIdentifier), which this build cannot open (it knows format \(known))",
                path: path)
        }
        self.bytes = bytes
        self.version = version
        self.protectionClass = protectionClass
        self.storeID = Array(reader.read(Self.storeIDLength)!)
    }

    /// Reads and checks the store key file at `path`.
    public static func load(from path: String) throws -> StoreKeyFile {
        try StoreKeyFile(bytes: try SecureFile.read(path, maximumSize: 64 << 10), path: path)
    }

    /// Unwraps the store key.
    ///
    /// - Parameters:
    ///   - classKey: the key of ``protectionClass``.
    ///   - path: the key file's path, named in an error.
    /// - Throws: `SecureKeysError.Code.wrongDevice` when the file is intact but the class key does not
    ///   open it (the file belongs to another device or keybag); `SecureKeysError.Code.keyWiped`.
    public func unwrap(with classKey: SecureBytes, path: String? = nil) throws -> SecureBytes {
        let wrappingKey = try KeyDerivation.derive(label: Self.wrappingLabel, from: classKey)
        defer { wrappingKey.wipe() }
        let wrapped = bytes[Self.headerLength..<(Self.headerLength + Self.wrappedKeyLength)]
        guard let key = try KeyWrap.unwrap(wrapped, with: wrappingKey, associatedData: Array(bytes[..<Self.headerLength])) else {
            throw SecureKeysError(
                code: .wrongDevice,
                message: "the store key does not unwrap with this device's \(protectionClass.name) class key (the key file belongs to another device or keybag)",
                path: path)
        }
        return key
    }

    /// This key file's image recording `storeFormat` instead.
    ///
    /// It holds the same store key, store identifier and class, wrapped again with a new nonce. The format is
    /// in the wrap's associated data, so it cannot be edited in place. Nothing is written. It is for a store
    /// rewritten into another format (`migrate`), whose key file is replaced by this image once the new store
    /// file is complete (<doc:KeyFileFormats>, *Rewriting a store*).
    ///
    /// - Parameters:
    ///   - storeFormat: the format to record; one a key file can record.
    ///   - classKey: the key of ``protectionClass``.
    ///   - path: this key file's path, named in an error.
    ///   - random: where the new nonce comes from.
    /// - Throws: `SecureKeysError.Code.wrongDevice` when `classKey` does not open it,
    ///   `SecureKeysError.Code.unsupportedKeyFormat` for a format no key file records.
    public func recording(
        _ storeFormat: StoreFormat, classKey: SecureBytes, path: String? = nil, random: any RandomSource = SystemRandom()
    ) throws -> StoreKeyFile {
        guard storeFormat.identifier != 0 else {
            throw SecureKeysError.unsupportedFormat("\(storeFormat) cannot be recorded in a key file", path: path)
        }
        let storeKey = try unwrap(with: classKey, path: path)
        defer { storeKey.wipe() }
        var header = ByteWriter()
        header.write(Self.magic)
        header.write(Self.formatVersion)
        header.write(protectionClass.rawValue)
        header.write(storeFormat.identifier)
        header.write(UInt8(0))
        header.write(storeID)
        let wrappingKey = try KeyDerivation.derive(label: Self.wrappingLabel, from: classKey)
        defer { wrappingKey.wipe() }
        var file = ByteWriter()
        file.write(header.bytes)
        file.write(try KeyWrap.wrap(storeKey, with: wrappingKey, associatedData: header.bytes, random: random))
        ChecksummedFile.seal(&file)
        return try StoreKeyFile(bytes: file.bytes, path: path)
    }

    /// Makes a new store key and its key file image (nothing is written), recording `storeFormat`.
    public static func make(
        protectionClass: ProtectionClass, classKey: SecureBytes, storeFormat: StoreFormat = .current,
        random: any RandomSource = SystemRandom()
    ) throws -> (file: StoreKeyFile, storeKey: SecureBytes) {
        try make(
            protectionClass: protectionClass, classKey: classKey, storeFormat: storeFormat, version: formatVersion,
            random: random)
    }

    /// Makes a key file image of `version`.
    ///
    /// The version is 2, or 1 (which records no store format) to rebuild the v1 known-answer vector.
    static func make(
        protectionClass: ProtectionClass, classKey: SecureBytes, storeFormat: StoreFormat, version: UInt8,
        random: any RandomSource
    ) throws -> (file: StoreKeyFile, storeKey: SecureBytes) {
        guard storeFormat.identifier != 0 else {
            throw SecureKeysError.unsupportedFormat("\(storeFormat) cannot be recorded in a key file")
        }
        var header = ByteWriter()
        header.write(magic)
        header.write(version)
        header.write(protectionClass.rawValue)
        header.write(version == 1 ? 0 : storeFormat.identifier)
        header.write(UInt8(0))
        header.write(random.bytes(count: storeIDLength))
        let storeKey = try SecureBytes.random(count: storeKeyLength, using: random)
        let wrappingKey = try KeyDerivation.derive(label: wrappingLabel, from: classKey)
        defer { wrappingKey.wipe() }
        var file = ByteWriter()
        file.write(header.bytes)
        file.write(try KeyWrap.wrap(storeKey, with: wrappingKey, associatedData: header.bytes, random: random))
        ChecksummedFile.seal(&file)
        return (try StoreKeyFile(bytes: file.bytes), storeKey)
    }

    /// Creates the key for a new store and writes its key file, refusing to orphan existing data.
    ///
    /// A real-world bug class: apps that could not read their key while locked made a new one and lost the
    /// store it belonged to. This call refuses when a store file (or its `-wal` journal) already exists at
    /// `storePath` without a key file, and never overwrites a key file.
    ///
    /// - Parameters:
    ///   - keyPath: where the key file goes (written atomically, mode 0600).
    ///   - storePath: the store the key is for.
    ///   - protectionClass: the store's class, recorded in the key file.
    ///   - classKey: the key of that class, which wraps the new store key.
    ///   - random: where the new key's bytes come from.
    /// - Returns: the new store key.
    /// - Throws: `SecureKeysError.Code.storeExistsWithoutKey`, `SecureKeysError.Code.alreadyExists`,
    ///   `SecureKeysError.Code.ioError`.
    public static func create(
        at keyPath: String, forStoreAt storePath: String, protectionClass: ProtectionClass, classKey: SecureBytes,
        random: any RandomSource = SystemRandom()
    ) throws -> SecureBytes {
        try create(at: keyPath, forStoreAt: storePath, protectionClass: protectionClass, classKey: classKey, random: random, in: .real)
    }

    /// Creates a store key and writes its key file in `fileSystem`, as
    /// ``create(at:forStoreAt:protectionClass:classKey:random:)`` does.
    package static func create(
        at keyPath: String, forStoreAt storePath: String, protectionClass: ProtectionClass, classKey: SecureBytes,
        random: any RandomSource = SystemRandom(), in fileSystem: FileSystem
    ) throws -> SecureBytes {
        if SecureFile.exists(keyPath) { throw SecureKeysError.alreadyExists(path: keyPath) }
        let files = StoreFiles(database: storePath)
        for existing in [files.database, files.writeAheadLog] where SecureFile.exists(existing) {
            throw SecureKeysError.storeExistsWithoutKey(storePath: existing)
        }
        let (file, storeKey) = try make(protectionClass: protectionClass, classKey: classKey, random: random)
        do {
            try SecureFile.writeAtomically(file.bytes, to: keyPath, replacing: false, in: fileSystem)
        } catch {
            storeKey.wipe()
            throw error
        }
        return storeKey
    }
}
