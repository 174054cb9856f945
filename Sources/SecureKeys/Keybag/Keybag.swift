package import DiskModel

/// The keybag, with one key per protection class.
///
/// Each key is wrapped so that only the right passcode on the right device unwraps it (formats v1 and v2,
/// specified byte by byte in <doc:KeyFileFormats>).
///
/// - Class keys of ``ProtectionClass/complete``, ``ProtectionClass/completeUnlessOpen`` and
///   ``ProtectionClass/completeUntilFirstUserAuthentication`` are wrapped by
///   KEK = BLAKE2b(key: device key, "ProtectedStore.keybag.kek.v1" ‖ Argon2id(passcode, salt)) in version 1;
///   in version 2 by KEK = BLAKE2b(key: device key, "ProtectedStore.keybag.kek.v2" ‖ Argon2id(passcode, salt) ‖ S),
///   where the passcode secret `S` is released by a ``PasscodeSecretSealer`` (a TPM) only for an authorization
///   value derived from the passcode key, so every guess goes through the TPM, which counts it.
/// - The ``ProtectionClass/none`` key is wrapped by a key derived from the device key alone.
/// - The whole file carries a BLAKE2b tag keyed from the device key, so truncation, bit flips and a keybag
///   from another device are told apart from a wrong passcode before any passcode is tried.
///
/// A `Keybag` value is an immutable file image: changing the passcode makes a new one.
public struct Keybag: Sendable {
    /// The format of a keybag whose passcode the device key and Argon2id alone protect.
    public static let formatVersion: UInt8 = 1
    /// The format of a keybag whose passcode classes also need the passcode secret a TPM releases.
    public static let passcodeSecretFormatVersion: UInt8 = 2
    /// The longest sealed passcode secret record a version-2 keybag holds.
    public static let maximumSealedSecretLength = 4096
    /// The magic bytes a keybag file starts with.
    public static let magic: [UInt8] = Array("PSKB".utf8)
    /// The Argon2id algorithm identifier stored in the header.
    static let argon2idAlgorithm: UInt8 = 2

    static let headerLength = 48
    static let entryPrefixLength = 36
    static let wrappedKeyLength = KeyWrap.wrappedLength(secretLength: 32)
    static let entryLength = entryPrefixLength + wrappedKeyLength
    static let tagLength = 32
    static let entriesEnd = headerLength + ProtectionClass.allCases.count * entryLength
    /// The length of every v1 keybag file.
    public static let fileLength = entriesEnd + tagLength
    /// The sealed secret's length (u16) and a reserved u16, between the entries and the record in version 2.
    static let sealedSecretHeaderLength = 4
    static let passcodeSecretLength = 32

    static let kekLabel = "ProtectedStore.keybag.kek.v1"
    static let kekV2Label = "ProtectedStore.keybag.kek.v2"
    static let passcodeAuthLabel = "ProtectedStore.tpm-passcode-auth.v1"
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
    /// The file's format version.
    ///
    /// It is ``formatVersion`` or ``passcodeSecretFormatVersion``.
    public let version: UInt8
    /// For version 2, the sealed passcode secret record its ``PasscodeSecretSealer`` made.
    ///
    /// `nil` in version 1.
    public let sealedPasscodeSecret: [UInt8]?
    /// The passcode key derivation's cost, as stored.
    public let kdf: PasscodeKDF
    /// How many times the passcode was changed since set-up.
    public let generation: UInt32
    /// What the device that owns this keybag promises about its other files (the header's flags field).
    public let options: Options
    /// The public half of the class-B key pair.
    ///
    /// It is always available, for sealing data while locked.
    public let completeUnlessOpenPublicKey: [UInt8]

    let salt: [UInt8]
    let entries: [ProtectionClass: Entry]

    /// The keybag's flags (offset 44, u32).
    ///
    /// Keybags from before the field was named hold 0.
    ///
    /// Authenticated by the keybag's tag and bound to every wrapped class key (the header is their
    /// associated data), so they cannot be cleared without the device key *and* the passcode.
    public struct Options: OptionSet, Sendable, Hashable {
        /// The field's bits.
        public let rawValue: UInt32
        /// Creates options from the field's bits.
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// The device's state file is authenticated (version 2 or later).
        ///
        /// A version-1 state file beside this keybag is a replaced one, a wrong-passcode counter set back, and is
        /// refused.
        public static let authenticatedDeviceState = Options(rawValue: 1)
    }

    // MARK: Reading

    /// Parses and verifies a keybag file.
    ///
    /// - Parameters:
    ///   - bytes: the file's contents.
    ///   - deviceKey: this device's key; the file's integrity tag is checked with it.
    ///   - path: the file's path, for error messages.
    /// - Throws: `SecureKeysError.Code.keyFileDamaged` (wrong length, bad magic, bad fields, a tag that does not
    ///   verify) or `SecureKeysError.Code.unsupportedKeyFormat`. Nothing is ever written.
    public init(bytes: [UInt8], deviceKey: SecureBytes, path: String? = nil) throws {
        var reader = ByteReader(bytes)
        guard bytes.count >= Self.magic.count + 1 else {
            throw SecureKeysError.damaged("keybag is \(bytes.count) bytes, a v1 keybag is \(Self.fileLength)", path: path)
        }
        guard Array(reader.read(4)!) == Self.magic else {
            throw SecureKeysError.damaged("not a keybag (bad magic)", path: path)
        }
        let version = reader.readUInt8()!
        guard version == Self.formatVersion || version == Self.passcodeSecretFormatVersion else {
            throw SecureKeysError.unsupportedFormat(
                "keybag version \(version); this build reads versions \(Self.formatVersion) and \(Self.passcodeSecretFormatVersion)",
                path: path)
        }
        var sealedSecretRange: Range<Int>?
        if version == Self.formatVersion {
            guard bytes.count == Self.fileLength else {
                throw SecureKeysError.damaged("keybag is \(bytes.count) bytes, a v1 keybag is \(Self.fileLength)", path: path)
            }
        } else {
            let recordStart = Self.entriesEnd + Self.sealedSecretHeaderLength
            var lengths = ByteReader(bytes, offset: Self.entriesEnd)
            guard bytes.count > recordStart + Self.tagLength, let length = lengths.readUInt16().map(Int.init),
                (1...Self.maximumSealedSecretLength).contains(length), bytes.count == recordStart + length + Self.tagLength
            else {
                throw SecureKeysError.damaged(
                    "keybag is \(bytes.count) bytes, which its sealed passcode secret's length does not account for", path: path)
            }
            sealedSecretRange = recordStart..<(recordStart + length)
        }
        let body = bytes[..<(bytes.count - Self.tagLength)]
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
        if let sealedSecretRange {
            // Checked after the tag, like the other fields: the reserved half of the length field is 0.
            guard bytes[Self.entriesEnd + 2] == 0, bytes[Self.entriesEnd + 3] == 0 else {
                throw SecureKeysError.damaged("the reserved bytes after the entries are not 0", path: path)
            }
            sealedPasscodeSecret = Array(bytes[sealedSecretRange])
        } else {
            sealedPasscodeSecret = nil
        }
        self.bytes = bytes
        self.version = version
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

    /// Unwraps the keys of every class with the passcode, as an unlock does.
    ///
    /// - Parameters:
    ///   - passcode: the passcode tried.
    ///   - deviceKey: this device's key.
    ///   - sealer: for a version-2 keybag, what releases its passcode secret (the TPM that sealed it); not used
    ///     for version 1.
    /// - Returns: the keys of all four classes.
    /// - Throws: `SecureKeysError.Code.wrongPasscode` when the passcode is wrong (in version 2, when the sealer
    ///   refuses it); `SecureKeysError.Code.invalidArgument` for a version-2 keybag without a sealer; the
    ///   sealer's errors.
    public func unlock(
        passcode: SecureBytes, deviceKey: SecureBytes, sealer: (any PasscodeSecretSealer)? = nil
    ) throws -> ClassKeys {
        let passcodeKey = try kdf.deriveKey(from: passcode, salt: salt)
        defer { passcodeKey.wipe() }
        let kek = try keyEncryptionKey(passcodeKey: passcodeKey, deviceKey: deviceKey, sealer: sealer)
        defer { kek.wipe() }
        var keys: [ProtectionClass: SecureBytes] = [:]
        do {
            for protectionClass in ProtectionClass.allCases where protectionClass.requiresPasscode {
                let entry = entries[protectionClass]!
                guard let key = try KeyWrap.unwrap(entry.wrappedKey, with: kek, associatedData: entry.associatedData) else {
                    // The tag verified the file, so an authentication failure of the first class means the
                    // passcode is wrong; of a later one, that the file is inconsistent. In version 2 the sealer
                    // already accepted the passcode: a class that does not unwrap then is damage.
                    if keys.isEmpty && version == Self.formatVersion { throw SecureKeysError.wrongPasscode() }
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

    /// The key that wraps the passcode classes.
    ///
    /// In version 1 it comes from the passcode key alone. In version 2 it comes also from the passcode secret,
    /// which the sealer releases for the authorization value derived from the passcode key.
    private func keyEncryptionKey(
        passcodeKey: SecureBytes, deviceKey: SecureBytes, sealer: (any PasscodeSecretSealer)?
    ) throws -> SecureBytes {
        guard let sealedPasscodeSecret else {
            return try KeyDerivation.derive(label: Self.kekLabel, from: deviceKey, mixing: passcodeKey)
        }
        guard let sealer else {
            throw SecureKeysError.invalidArgument(
                "a version-2 keybag needs the TPM that sealed its passcode secret, and none was given")
        }
        let authValue = try Self.passcodeAuthValue(passcodeKey: passcodeKey)
        defer { authValue.wipe() }
        let secret = try sealer.unsealPasscodeSecret(sealedPasscodeSecret, authValue: authValue)
        defer { secret.wipe() }
        guard secret.count == Self.passcodeSecretLength else {
            throw SecureKeysError.damaged("the sealed passcode secret is \(secret.count) bytes, not \(Self.passcodeSecretLength)")
        }
        return try Self.keyEncryptionKeyV2(passcodeKey: passcodeKey, secret: secret, deviceKey: deviceKey)
    }

    /// `BLAKE2b(key: device key, L_kek_v2 ‖ passcode key ‖ S)`.
    private static func keyEncryptionKeyV2(
        passcodeKey: SecureBytes, secret: SecureBytes, deviceKey: SecureBytes
    ) throws -> SecureBytes {
        let input = try SecureBytes(count: passcodeKey.count + secret.count)
        defer { input.wipe() }
        try input.withUnsafeMutableBytes { out in
            try passcodeKey.withUnsafeBytes { out.copyMemory(from: $0) }
            try secret.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[passcodeKey.count...]).copyMemory(from: $0) }
        }
        return try KeyDerivation.derive(label: kekV2Label, from: deviceKey, mixing: input)
    }

    /// The authorization value a version-2 keybag's passcode secret is sealed under.
    ///
    /// It is `BLAKE2b(key: passcode key, "ProtectedStore.tpm-passcode-auth.v1")`. The sealer never sees the
    /// passcode, nor the passcode key.
    static func passcodeAuthValue(passcodeKey: SecureBytes) throws -> SecureBytes {
        try KeyDerivation.derive(label: passcodeAuthLabel, from: passcodeKey)
    }

    /// Unwraps the class-``ProtectionClass/none`` key, which needs only the device key.
    ///
    /// That key is available from boot.
    ///
    /// - Throws: `SecureKeysError.Code.keyFileDamaged` when it does not unwrap.
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
    ///   - sealer: `nil` for a version-1 keybag; a TPM's sealer for a version-2 one, whose passcode secret it
    ///     seals under an authorization value derived from the passcode.
    ///   - random: where keys, salt, the passcode secret and nonces come from.
    /// - Returns: the keybag and its class keys, unwrapped (the device is unlocked after set-up).
    public static func create(
        passcode: SecureBytes, deviceKey: SecureBytes, kdf: PasscodeKDF = .default, options: Options = [],
        sealer: (any PasscodeSecretSealer)? = nil, random: any RandomSource = SystemRandom()
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
        do {
            let keybag = try seal(
                classKeys, classBPublicKey: publicKey, passcode: passcode, deviceKey: deviceKey, kdf: kdf, salt: salt,
                generation: 0, options: options, sealer: sealer, random: random)
            return (keybag, classKeys)
        } catch {
            classKeys.wipeAll()
            throw error
        }
    }

    /// The same class keys under a new passcode.
    ///
    /// It has a new salt, optionally a new cost, and generation + 1.
    ///
    /// No store needs rekeying: the class keys do not change, only what wraps them. Write the result with
    /// ``write(to:)``, which replaces the file atomically, so a crash leaves the old or the new passcode
    /// working, never neither. A version-2 keybag stays version 2: a new passcode secret is sealed under the
    /// new passcode's authorization value, and the record is part of the file, so the one rename switches both.
    ///
    /// - Parameters:
    ///   - old: the passcode the keybag is sealed under now.
    ///   - new: the passcode to seal it under.
    ///   - deviceKey: the device key.
    ///   - newKDF: the new passcode's Argon2id cost, or `nil` for the current one.
    ///   - sealer: for a version-2 keybag, its TPM's sealer (it unseals the old secret and seals the new).
    ///   - random: where the new salt (and a version-2 keybag's new passcode secret) come from.
    /// - Throws: `SecureKeysError.Code.wrongPasscode` when `old` is wrong.
    public func changingPasscode(
        from old: SecureBytes, to new: SecureBytes, deviceKey: SecureBytes, kdf newKDF: PasscodeKDF? = nil,
        sealer: (any PasscodeSecretSealer)? = nil, random: any RandomSource = SystemRandom()
    ) throws -> Keybag {
        let keys = try unlock(passcode: old, deviceKey: deviceKey, sealer: sealer)
        defer { keys.wipeAll() }
        return try Self.seal(
            keys, classBPublicKey: completeUnlessOpenPublicKey, passcode: new, deviceKey: deviceKey,
            kdf: newKDF ?? kdf, salt: random.bytes(count: PasscodeKDF.saltLength), generation: generation &+ 1,
            options: options, sealer: version == Self.passcodeSecretFormatVersion ? sealer : nil, random: random)
    }

    /// The same class keys, passcode and options in a version-2 keybag whose passcode secret `sealer` seals.
    ///
    /// This moves a TPM device's keybag to version 2. It has a new salt, and the same cost and generation. Write
    /// the result with ``write(to:)``. The old keybag stays valid until its rename.
    ///
    /// - Parameters:
    ///   - passcode: the device's passcode.
    ///   - deviceKey: this device's key.
    ///   - sealer: the TPM's sealer; for a keybag already at version 2, it also unseals the old secret.
    ///   - random: where the salt, the passcode secret and nonces come from.
    /// - Throws: `SecureKeysError.Code.wrongPasscode` when `passcode` is wrong; the sealer's errors.
    public func sealingPasscodeSecret(
        passcode: SecureBytes, deviceKey: SecureBytes, sealer: any PasscodeSecretSealer,
        random: any RandomSource = SystemRandom()
    ) throws -> Keybag {
        let keys = try unlock(passcode: passcode, deviceKey: deviceKey, sealer: sealer)
        defer { keys.wipeAll() }
        return try Self.seal(
            keys, classBPublicKey: completeUnlessOpenPublicKey, passcode: passcode, deviceKey: deviceKey, kdf: kdf,
            salt: random.bytes(count: PasscodeKDF.saltLength), generation: generation, options: options, sealer: sealer,
            random: random)
    }

    /// The same class keys and passcode with `added` options recorded.
    ///
    /// It has a new salt, and the same generation.
    ///
    /// The options are bound to every wrapped key, so recording one needs the passcode: a device records
    /// them at an unlock. Write the result with ``write(to:)``.
    ///
    /// - Throws: `SecureKeysError.Code.wrongPasscode` when `passcode` is wrong.
    public func adding(
        _ added: Options, passcode: SecureBytes, deviceKey: SecureBytes, sealer: (any PasscodeSecretSealer)? = nil,
        random: any RandomSource = SystemRandom()
    ) throws -> Keybag {
        try resealed(options: options.union(added), passcode: passcode, deviceKey: deviceKey, sealer: sealer, random: random)
    }

    /// The same keybag without `removed` options.
    ///
    /// This is what a device from before an option existed wrote, for tests of the upgrade path.
    package func removing(
        _ removed: Options, passcode: SecureBytes, deviceKey: SecureBytes, sealer: (any PasscodeSecretSealer)? = nil,
        random: any RandomSource = SystemRandom()
    ) throws -> Keybag {
        try resealed(
            options: options.subtracting(removed), passcode: passcode, deviceKey: deviceKey, sealer: sealer, random: random)
    }

    /// The same class keys and passcode under `options`, in the same version.
    ///
    /// It has a new salt (and, in version 2, a new passcode secret), and the same cost and generation.
    private func resealed(
        options: Options, passcode: SecureBytes, deviceKey: SecureBytes, sealer: (any PasscodeSecretSealer)?,
        random: any RandomSource
    ) throws -> Keybag {
        let keys = try unlock(passcode: passcode, deviceKey: deviceKey, sealer: sealer)
        defer { keys.wipeAll() }
        return try Self.seal(
            keys, classBPublicKey: completeUnlessOpenPublicKey, passcode: passcode, deviceKey: deviceKey, kdf: kdf,
            salt: random.bytes(count: PasscodeKDF.saltLength), generation: generation, options: options,
            sealer: version == Self.passcodeSecretFormatVersion ? sealer : nil, random: random)
    }

    /// Wraps `keys` into a new keybag.
    ///
    /// It is version 1 without a sealer, and version 2 with one (a fresh passcode secret, sealed under the
    /// authorization value derived from the passcode key).
    private static func seal(
        _ keys: ClassKeys, classBPublicKey: [UInt8], passcode: SecureBytes, deviceKey: SecureBytes,
        kdf: PasscodeKDF, salt: [UInt8], generation: UInt32, options: Options, sealer: (any PasscodeSecretSealer)?,
        random: any RandomSource
    ) throws -> Keybag {
        guard deviceKey.count == 32 else { throw SecureKeysError.invalidArgument("the device key must be 32 bytes") }
        var header = ByteWriter()
        header.write(magic)
        header.write(sealer == nil ? formatVersion : passcodeSecretFormatVersion)
        header.write(argon2idAlgorithm)
        header.write(UInt16(ProtectionClass.allCases.count))
        header.write(kdf.opsLimit)
        header.write(kdf.memLimit)
        header.write(salt)
        header.write(generation)
        header.write(options.rawValue)

        let passcodeKey = try kdf.deriveKey(from: passcode, salt: salt)
        defer { passcodeKey.wipe() }
        let kek: SecureBytes
        var sealedSecret: [UInt8]?
        if let sealer {
            let secret = try SecureBytes.random(count: passcodeSecretLength, using: random)
            defer { secret.wipe() }
            let authValue = try passcodeAuthValue(passcodeKey: passcodeKey)
            defer { authValue.wipe() }
            let record = try sealer.sealPasscodeSecret(secret, authValue: authValue)
            guard (1...maximumSealedSecretLength).contains(record.count) else {
                throw SecureKeysError.invalidArgument(
                    "a sealed passcode secret is 1 to \(maximumSealedSecretLength) bytes, not \(record.count)")
            }
            sealedSecret = record
            kek = try keyEncryptionKeyV2(passcodeKey: passcodeKey, secret: secret, deviceKey: deviceKey)
        } else {
            kek = try KeyDerivation.derive(label: kekLabel, from: deviceKey, mixing: passcodeKey)
        }
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
        if let sealedSecret {
            file.write(UInt16(sealedSecret.count))
            file.write(UInt16(0))
            file.write(sealedSecret)
        }
        let tagKey = try KeyDerivation.derive(label: tagLabel, from: deviceKey)
        defer { tagKey.wipe() }
        file.write(try KeyDerivation.authenticationTag(for: file.bytes[...], key: tagKey))
        return try Keybag(bytes: file.bytes, deviceKey: deviceKey)
    }

    // MARK: Writing

    /// Writes the keybag to `path` atomically (mode 0600), replacing an older keybag there.
    ///
    /// - Throws: `SecureKeysError.Code.ioError`; the previous file is then intact.
    public func write(to path: String) throws {
        try write(to: path, in: .real)
    }

    /// Writes the keybag to `path` in `fileSystem`, as ``write(to:)`` does.
    package func write(to path: String, in fileSystem: FileSystem) throws {
        try SecureFile.writeAtomically(bytes, to: path, replacing: true, in: fileSystem)
    }
}
