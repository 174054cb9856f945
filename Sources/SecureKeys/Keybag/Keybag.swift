/// The keybag: one key per protection class, wrapped so that only the right passcode on the right device
/// unwraps it (format v1, specified byte by byte in [keys/README.md](<doc:KeyFileFormats>)).
///
/// - Class keys of ``ProtectionClass/complete``, ``ProtectionClass/completeUnlessOpen`` and
///   ``ProtectionClass/completeUntilFirstUserAuthentication`` are wrapped by
///   KEK = BLAKE2b(key: device key, "ProtectedStore.keybag.kek.v1" ‖ Argon2id(passcode, salt)).
/// - The ``ProtectionClass/none`` key is wrapped by a key derived from the device key alone.
/// - The whole file carries a BLAKE2b tag keyed from the device key, so truncation, bit flips and a keybag
///   from another device are told apart from a wrong passcode before any passcode is tried.
///
/// A `Keybag` value is an immutable file image: changing the passcode makes a new one.
public struct Keybag: Sendable {
    /// The format this type reads and writes.
    public static let formatVersion: UInt8 = 1
    /// The magic bytes a keybag file starts with.
    public static let magic: [UInt8] = Array("PSKB".utf8)
    /// The Argon2id algorithm identifier stored in the header.
    static let argon2idAlgorithm: UInt8 = 2

    static let headerLength = 48
    static let entryPrefixLength = 36
    static let wrappedKeyLength = KeyWrap.wrappedLength(secretLength: 32)
    static let entryLength = entryPrefixLength + wrappedKeyLength
    static let tagLength = 32
    /// The length of every v1 keybag file.
    public static let fileLength = headerLength + ProtectionClass.allCases.count * entryLength + tagLength

    static let kekLabel = "ProtectedStore.keybag.kek.v1"
    static let noneClassLabel = "ProtectedStore.keybag.class-none.v1"
    static let tagLabel = "ProtectedStore.keybag.tag.v1"

    enum KeyKind: UInt8 {
        case symmetric = 1
        case x25519PrivateKey = 2
    }

    struct Entry: Sendable {
        var protectionClass: ProtectionClass
        var kind: KeyKind
        var publicKey: [UInt8]
        var wrappedKey: ArraySlice<UInt8>
        var associatedData: [UInt8]
    }

    /// The file's bytes, exactly as written to disk.
    public let bytes: [UInt8]
    /// The passcode key derivation's cost, as stored.
    public let kdf: PasscodeKDF
    /// How many times the passcode was changed since set-up.
    public let generation: UInt32
    /// What the device that owns this keybag promises about its other files (the header's flags field).
    public let options: Options
    /// The public half of the class-B key pair: always available, for sealing data while locked.
    public let completeUnlessOpenPublicKey: [UInt8]

    let salt: [UInt8]
    let entries: [ProtectionClass: Entry]

    /// The keybag's flags (offset 44, u32; keybags from before the field was named hold 0).
    ///
    /// Authenticated by the keybag's tag and bound to every wrapped class key (the header is their
    /// associated data), so they cannot be cleared without the device key *and* the passcode.
    public struct Options: OptionSet, Sendable, Hashable {
        /// The field's bits.
        public let rawValue: UInt32
        /// Creates options from the field's bits.
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// The device's state file is authenticated (version 2 or later): a version-1 state file beside this
        /// keybag is a replaced one — a wrong-passcode counter set back — and is refused.
        public static let authenticatedDeviceState = Options(rawValue: 1)
    }

    // MARK: Reading

    /// Parses and verifies a keybag file.
    ///
    /// - Parameters:
    ///   - bytes: the file's contents.
    ///   - deviceKey: this device's key; the file's integrity tag is checked with it.
    ///   - path: the file's path, for error messages.
    /// - Throws: ``SecureKeysError/Code/damaged`` (wrong length, bad magic, bad fields, a tag that does not
    ///   verify) or ``SecureKeysError/Code/unsupportedFormat``. Nothing is ever written.
    public init(bytes: [UInt8], deviceKey: SecureBytes, path: String? = nil) throws {
        var reader = ByteReader(bytes)
        guard bytes.count >= Self.magic.count + 1 else {
            throw SecureKeysError.damaged("keybag is \(bytes.count) bytes, a v1 keybag is \(Self.fileLength)", path: path)
        }
        guard Array(reader.read(4)!) == Self.magic else {
            throw SecureKeysError.damaged("not a keybag (bad magic)", path: path)
        }
        let version = reader.readUInt8()!
        guard version == Self.formatVersion else {
            throw SecureKeysError.unsupportedFormat("keybag version \(version); this build reads version \(Self.formatVersion)", path: path)
        }
        guard bytes.count == Self.fileLength else {
            throw SecureKeysError.damaged("keybag is \(bytes.count) bytes, a v1 keybag is \(Self.fileLength)", path: path)
        }
        let body = bytes[..<(Self.fileLength - Self.tagLength)]
        let tagKey = try KeyDerivation.derive(label: Self.tagLabel, from: deviceKey)
        defer { tagKey.wipe() }
        let expectedTag = try KeyDerivation.authenticationTag(for: body, key: tagKey)
        guard KeyDerivation.constantTimeEquals(expectedTag, Array(bytes[body.endIndex...])) else {
            throw SecureKeysError.damaged(
                "integrity tag does not verify with this device's key (the file was altered, or belongs to another device)",
                path: path)
        }
        // The tag verified: the fields below were written by this code on this device. The checks that
        // follow guard against a bug, not an attacker.
        guard reader.readUInt8() == Self.argon2idAlgorithm, reader.readUInt16() == UInt16(ProtectionClass.allCases.count)
        else { throw SecureKeysError.damaged("unknown KDF algorithm or entry count", path: path) }
        let kdf = PasscodeKDF(opsLimit: reader.readUInt64()!, memLimit: reader.readUInt64()!)
        guard kdf.isValid else { throw SecureKeysError.damaged("Argon2id parameters out of range", path: path) }
        let salt = Array(reader.read(PasscodeKDF.saltLength)!)
        let generation = reader.readUInt32()!
        let options = Options(rawValue: reader.readUInt32()!)
        let header = Array(bytes[..<Self.headerLength])

        var entries: [ProtectionClass: Entry] = [:]
        for expectedClass in ProtectionClass.allCases {
            let prefixStart = reader.offset
            guard let classID = reader.readUInt8(), classID == expectedClass.rawValue,
                let kind = reader.readUInt8().flatMap(KeyKind.init(rawValue:)),
                kind == (expectedClass == .completeUnlessOpen ? .x25519PrivateKey : .symmetric)
            else { throw SecureKeysError.damaged("entry for class \(expectedClass.name) is malformed", path: path) }
            _ = reader.readUInt16()  // reserved
            let publicKey = Array(reader.read(SealedBox.publicKeyLength)!)
            let prefix = Array(bytes[prefixStart..<reader.offset])
            entries[expectedClass] = Entry(
                protectionClass: expectedClass, kind: kind, publicKey: publicKey,
                wrappedKey: reader.read(Self.wrappedKeyLength)!, associatedData: header + prefix)
        }
        self.bytes = bytes
        self.kdf = kdf
        self.generation = generation
        self.options = options
        self.salt = salt
        self.entries = entries
        self.completeUnlessOpenPublicKey = entries[.completeUnlessOpen]!.publicKey
    }

    /// Reads and verifies the keybag at `path`.
    ///
    /// - Throws: see ``init(bytes:deviceKey:path:)`` and `SecureFile/read(_:maximumSize:)`.
    public static func load(from path: String, deviceKey: SecureBytes) throws -> Keybag {
        try Keybag(bytes: try SecureFile.read(path, maximumSize: 64 << 10), deviceKey: deviceKey, path: path)
    }

    // MARK: Unwrapping

    /// Unwraps the keys of every class with the passcode: what an unlock does.
    ///
    /// - Returns: the keys of all four classes.
    /// - Throws: ``SecureKeysError/Code/wrongPasscode`` when the passcode is wrong.
    public func unlock(passcode: SecureBytes, deviceKey: SecureBytes) throws -> ClassKeys {
        let passcodeKey = try kdf.deriveKey(from: passcode, salt: salt)
        defer { passcodeKey.wipe() }
        let kek = try KeyDerivation.derive(label: Self.kekLabel, from: deviceKey, mixing: passcodeKey)
        defer { kek.wipe() }
        var keys: [ProtectionClass: SecureBytes] = [:]
        do {
            for protectionClass in ProtectionClass.allCases where protectionClass.requiresPasscode {
                let entry = entries[protectionClass]!
                guard let key = try KeyWrap.unwrap(entry.wrappedKey, with: kek, associatedData: entry.associatedData) else {
                    // The tag verified the file, so an authentication failure of the first class means the
                    // passcode is wrong; of a later one, that the file is inconsistent.
                    if keys.isEmpty { throw SecureKeysError.wrongPasscode() }
                    throw SecureKeysError.damaged("class \(protectionClass.name) does not unwrap with the passcode that unwrapped the others")
                }
                keys[protectionClass] = key
            }
            keys[.none] = try unwrapNoneClassKey(deviceKey: deviceKey)
        } catch {
            for key in keys.values { key.wipe() }
            throw error
        }
        return ClassKeys(keys)
    }

    /// Unwraps the class-``ProtectionClass/none`` key, which needs only the device key: available from boot.
    ///
    /// - Throws: ``SecureKeysError/Code/damaged`` when it does not unwrap.
    public func unwrapNoneClassKey(deviceKey: SecureBytes) throws -> SecureBytes {
        let wrappingKey = try KeyDerivation.derive(label: Self.noneClassLabel, from: deviceKey)
        defer { wrappingKey.wipe() }
        let entry = entries[.none]!
        guard let key = try KeyWrap.unwrap(entry.wrappedKey, with: wrappingKey, associatedData: entry.associatedData) else {
            throw SecureKeysError.damaged("class none does not unwrap with this device's key")
        }
        return key
    }

    // MARK: Creating

    /// Creates a keybag with fresh class keys for a device being set up.
    ///
    /// - Parameters:
    ///   - passcode: the new passcode.
    ///   - deviceKey: the device's key (32 bytes).
    ///   - kdf: the Argon2id cost to store.
    ///   - options: the flags to record (none by default, as the known-answer vectors have).
    ///   - random: where keys, salt and nonces come from.
    /// - Returns: the keybag and its class keys, unwrapped (the device is unlocked after set-up).
    public static func create(
        passcode: SecureBytes, deviceKey: SecureBytes, kdf: PasscodeKDF = .default, options: Options = [],
        random: any RandomSource = SystemRandom()
    ) throws -> (keybag: Keybag, keys: ClassKeys) {
        var keys: [ProtectionClass: SecureBytes] = [:]
        var publicKey: [UInt8] = []
        for protectionClass in ProtectionClass.allCases {
            if protectionClass == .completeUnlessOpen {
                let pair = try SealedBox.makeKeyPair(random: random)
                keys[protectionClass] = pair.privateKey
                publicKey = pair.publicKey
            } else {
                keys[protectionClass] = try SecureBytes.random(count: 32, using: random)
            }
        }
        let classKeys = ClassKeys(keys)
        let salt = random.bytes(count: PasscodeKDF.saltLength)
        let keybag = try seal(
            classKeys, classBPublicKey: publicKey, passcode: passcode, deviceKey: deviceKey, kdf: kdf, salt: salt,
            generation: 0, options: options, random: random)
        return (keybag, classKeys)
    }

    /// The same class keys under a new passcode: a new salt, optionally a new cost, generation + 1.
    ///
    /// No store needs rekeying: the class keys do not change, only what wraps them. Write the result with
    /// ``write(to:)``, which replaces the file atomically, so a crash leaves the old or the new passcode
    /// working, never neither.
    ///
    /// - Throws: ``SecureKeysError/Code/wrongPasscode`` when `old` is wrong.
    public func changingPasscode(
        from old: SecureBytes, to new: SecureBytes, deviceKey: SecureBytes, kdf newKDF: PasscodeKDF? = nil,
        random: any RandomSource = SystemRandom()
    ) throws -> Keybag {
        let keys = try unlock(passcode: old, deviceKey: deviceKey)
        defer { keys.wipeAll() }
        return try Self.seal(
            keys, classBPublicKey: completeUnlessOpenPublicKey, passcode: new, deviceKey: deviceKey,
            kdf: newKDF ?? kdf, salt: random.bytes(count: PasscodeKDF.saltLength), generation: generation &+ 1,
            options: options, random: random)
    }

    /// The same class keys and passcode with `added` options recorded: a new salt, the same generation.
    ///
    /// The options are bound to every wrapped key, so recording one needs the passcode: a device records
    /// them at an unlock. Write the result with ``write(to:)``.
    ///
    /// - Throws: ``SecureKeysError/Code/wrongPasscode`` when `passcode` is wrong.
    public func adding(
        _ added: Options, passcode: SecureBytes, deviceKey: SecureBytes, random: any RandomSource = SystemRandom()
    ) throws -> Keybag {
        try resealed(options: options.union(added), passcode: passcode, deviceKey: deviceKey, random: random)
    }

    /// The same keybag without `removed` options: what a device from before an option existed wrote, for
    /// tests of the upgrade path.
    package func removing(
        _ removed: Options, passcode: SecureBytes, deviceKey: SecureBytes, random: any RandomSource = SystemRandom()
    ) throws -> Keybag {
        try resealed(options: options.subtracting(removed), passcode: passcode, deviceKey: deviceKey, random: random)
    }

    /// The same class keys and passcode under `options`: a new salt, the same cost and generation.
    private func resealed(
        options: Options, passcode: SecureBytes, deviceKey: SecureBytes, random: any RandomSource
    ) throws -> Keybag {
        let keys = try unlock(passcode: passcode, deviceKey: deviceKey)
        defer { keys.wipeAll() }
        return try Self.seal(
            keys, classBPublicKey: completeUnlessOpenPublicKey, passcode: passcode, deviceKey: deviceKey, kdf: kdf,
            salt: random.bytes(count: PasscodeKDF.saltLength), generation: generation, options: options, random: random)
    }

    private static func seal(
        _ keys: ClassKeys, classBPublicKey: [UInt8], passcode: SecureBytes, deviceKey: SecureBytes,
        kdf: PasscodeKDF, salt: [UInt8], generation: UInt32, options: Options, random: any RandomSource
    ) throws -> Keybag {
        guard deviceKey.count == 32 else { throw SecureKeysError.invalidArgument("the device key must be 32 bytes") }
        var header = ByteWriter()
        header.write(magic)
        header.write(formatVersion)
        header.write(argon2idAlgorithm)
        header.write(UInt16(ProtectionClass.allCases.count))
        header.write(kdf.opsLimit)
        header.write(kdf.memLimit)
        header.write(salt)
        header.write(generation)
        header.write(options.rawValue)

        let passcodeKey = try kdf.deriveKey(from: passcode, salt: salt)
        defer { passcodeKey.wipe() }
        let kek = try KeyDerivation.derive(label: kekLabel, from: deviceKey, mixing: passcodeKey)
        defer { kek.wipe() }
        let noneKey = try KeyDerivation.derive(label: noneClassLabel, from: deviceKey)
        defer { noneKey.wipe() }

        var file = ByteWriter()
        file.write(header.bytes)
        for protectionClass in ProtectionClass.allCases {
            var prefix = ByteWriter()
            prefix.write(protectionClass.rawValue)
            let isKeyPair = protectionClass == .completeUnlessOpen
            prefix.write((isKeyPair ? KeyKind.x25519PrivateKey : KeyKind.symmetric).rawValue)
            prefix.write(UInt16(0))
            prefix.write(isKeyPair ? classBPublicKey : [UInt8](repeating: 0, count: SealedBox.publicKeyLength))
            let wrapped = try KeyWrap.wrap(
                keys[protectionClass]!, with: protectionClass.requiresPasscode ? kek : noneKey,
                associatedData: header.bytes + prefix.bytes, random: random)
            file.write(prefix.bytes)
            file.write(wrapped)
        }
        let tagKey = try KeyDerivation.derive(label: tagLabel, from: deviceKey)
        defer { tagKey.wipe() }
        file.write(try KeyDerivation.authenticationTag(for: file.bytes[...], key: tagKey))
        return try Keybag(bytes: file.bytes, deviceKey: deviceKey)
    }

    // MARK: Writing

    /// Writes the keybag to `path` atomically (mode 0600), replacing an older keybag there.
    ///
    /// - Throws: ``SecureKeysError/Code/io``; the previous file is then intact.
    public func write(to path: String) throws {
        try SecureFile.writeAtomically(bytes, to: path, replacing: true)
    }
}
