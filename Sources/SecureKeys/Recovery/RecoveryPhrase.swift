internal import CSodium

/// The secret a user writes down so that a backup outlives the device.
///
/// It is 128 random bits and a 32-bit checksum, shown as 32 Crockford base32 characters in eight groups of four
/// (`7K3M-…`).
///
/// Crockford's alphabet leaves out `I`, `L`, `O` and `U`; reading, `I` and `L` are taken for `1` and `O` for
/// `0`, case does not matter, and hyphens and spaces are ignored. The checksum (the first four bytes of
/// `BLAKE2b(key: entropy, "ProtectedStore.recovery-phrase.checksum.v1")`) tells a typing mistake
/// (`SecureKeysError.Code.recoveryPhraseMistyped`, naming the group) from a well-formed phrase of another
/// recovery key (`SecureKeysError.Code.wrongRecoveryPhrase`): a mistyped phrase passes it once in 2³².
///
/// The phrase lives only in guarded memory: its text (``text``) and its bytes. <doc:KeyFileFormats> ("Recovery
/// phrase") specifies it.
public final class RecoveryPhrase: Sendable {
    /// The random bits a phrase carries, in bytes.
    public static let entropyLength = 16
    /// The checksum's length, in bytes.
    public static let checksumLength = 4
    /// Characters per group.
    public static let groupLength = 4
    /// Groups in a phrase.
    public static let groupCount = 8
    /// The Crockford base32 alphabet.
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)
    static let checksumLabel = "ProtectedStore.recovery-phrase.checksum.v1"

    /// The 16 random bytes that Argon2id turns into the recovery key.
    let entropy: SecureBytes
    /// The phrase as it is shown.
    ///
    /// It is eight groups of four characters joined by hyphens (39 ASCII bytes).
    public let text: SecureBytes

    private init(entropy: SecureBytes) throws {
        self.entropy = entropy
        let checksum = try Self.checksum(of: entropy)
        defer { checksum.wipe() }
        let payload = try SecureBytes(count: Self.entropyLength + Self.checksumLength)
        defer { payload.wipe() }
        try payload.withUnsafeMutableBytes { out in
            try entropy.withUnsafeBytes { out.copyMemory(from: $0) }
            try checksum.withUnsafeBytes { bytes in
                UnsafeMutableRawBufferPointer(rebasing: out[Self.entropyLength...])
                    .copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[..<Self.checksumLength]))
            }
        }
        let characters = Self.groupLength * Self.groupCount
        text = try SecureBytes(count: characters + Self.groupCount - 1)
        try payload.withUnsafeBytes { bytes in
            text.unsafeWithMutableBytes { out in
                var position = 0
                for index in 0..<characters {
                    if index > 0, index % Self.groupLength == 0 {
                        out[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    out[position] = Self.alphabet[Int(Self.fiveBits(at: index, of: bytes))]
                    position += 1
                }
            }
        }
    }

    /// A new phrase of ``entropyLength`` random bytes.
    ///
    /// - Throws: `SecureKeysError.Code.outOfMemory`.
    public static func generate(random: any RandomSource = SystemRandom()) throws -> RecoveryPhrase {
        try RecoveryPhrase(entropy: try SecureBytes.random(count: entropyLength, using: random))
    }

    /// Reads a phrase as the user typed it (any case, with or without hyphens and spaces).
    ///
    /// - Parameter typed: the typed text, in guarded memory; it is not kept.
    /// - Throws: `SecureKeysError.Code.recoveryPhraseMistyped` naming what is wrong (a character that is not
    ///   in the alphabet and its position, the number of characters, or which group breaks the checksum) —
    ///   never the phrase itself.
    public convenience init(typed: SecureBytes) throws {
        let characters = Self.groupLength * Self.groupCount
        let values = try SecureBytes(count: characters)
        defer { values.wipe() }
        var count = 0
        var problem: String?
        try typed.withUnsafeBytes { input in
            values.unsafeWithMutableBytes { out in
                for (offset, byte) in input.enumerated() {
                    if byte == UInt8(ascii: "-") || byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t")
                        || byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r")
                    {
                        continue
                    }
                    guard let value = Self.value(of: byte) else {
                        problem = problem ?? "character \(offset + 1) is not one of a recovery phrase's (0-9 and A-Z except U; I and L are read as 1, O as 0)"
                        continue
                    }
                    if count < characters { out[count] = value }
                    count += 1
                }
            }
        }
        if let problem { throw SecureKeysError(code: .recoveryPhraseMistyped, message: "the recovery phrase is mistyped: \(problem)") }
        guard count == characters else {
            throw SecureKeysError(
                code: .recoveryPhraseMistyped,
                message: "the recovery phrase is mistyped: it has \(count) characters, a recovery phrase has \(characters) (\(Self.groupCount) groups of \(Self.groupLength))")
        }
        let payload = try SecureBytes(count: Self.entropyLength + Self.checksumLength)
        defer { payload.wipe() }
        try values.withUnsafeBytes { symbols in
            payload.unsafeWithMutableBytes { out in
                var accumulator: UInt32 = 0
                var bits = 0
                var written = 0
                for symbol in symbols {
                    accumulator = (accumulator << 5) | UInt32(symbol)
                    bits += 5
                    if bits >= 8 {
                        bits -= 8
                        out[written] = UInt8(truncatingIfNeeded: accumulator >> UInt32(bits))
                        written += 1
                    }
                }
                accumulator = 0
            }
        }
        let entropy = try SecureBytes(count: Self.entropyLength)
        try payload.withUnsafeBytes { bytes in
            entropy.unsafeWithMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[..<Self.entropyLength])) }
        }
        let expected = try Self.checksum(of: entropy)
        defer { expected.wipe() }
        let matches = try payload.withUnsafeBytes { bytes in
            try expected.withUnsafeBytes { sum in
                sodium_memcmp(bytes.baseAddress! + Self.entropyLength, sum.baseAddress!, Self.checksumLength) == 0
            }
        }
        guard matches else {
            entropy.wipe()
            throw SecureKeysError(
                code: .recoveryPhraseMistyped,
                message: "the recovery phrase is mistyped: its checksum does not match (a character was changed, left out or swapped; check each group against what was written down)")
        }
        try self.init(entropy: entropy)
    }

    deinit {
        entropy.wipe()
        text.wipe()
    }

    /// Derives the recovery key pair.
    ///
    /// Argon2id of the phrase's 16 bytes with `salt` and `kdf` gives a 32-byte seed, and
    /// `crypto_box_seed_keypair` turns it into an X25519 key pair.
    ///
    /// - Returns: the public key (not secret) and the private key, in guarded memory.
    /// - Throws: `SecureKeysError.Code.invalidArgument` for parameters libsodium refuses,
    ///   `SecureKeysError.Code.outOfMemory`.
    public func deriveKeyPair(kdf: PasscodeKDF, salt: [UInt8]) throws -> (publicKey: [UInt8], privateKey: SecureBytes) {
        let seed = try kdf.deriveKey(from: entropy, salt: salt)
        defer { seed.wipe() }
        return try SealedBox.keyPair(fromSeed: seed)
    }

    /// The first ``checksumLength`` bytes (of 32) of the checksum of `entropy`, in guarded memory.
    private static func checksum(of entropy: SecureBytes) throws -> SecureBytes {
        try KeyDerivation.derive(label: checksumLabel, from: entropy)
    }

    /// The 5-bit group `index` of `bytes`, most significant bit first.
    private static func fiveBits(at index: Int, of bytes: UnsafeRawBufferPointer) -> UInt8 {
        var value: UInt8 = 0
        for bit in 0..<5 {
            let position = index * 5 + bit
            let set = bytes[position / 8] >> (7 - UInt8(position % 8)) & 1
            value = value << 1 | set
        }
        return value
    }

    /// The value of a typed character, by Crockford's reading.
    ///
    /// The reading is case-insensitive, with `I`, `L` → 1 and `O` → 0.
    private static func value(of byte: UInt8) -> UInt8? {
        var upper = byte
        if upper >= UInt8(ascii: "a") && upper <= UInt8(ascii: "z") { upper -= 32 }
        switch upper {
        case UInt8(ascii: "I"), UInt8(ascii: "L"): return 1
        case UInt8(ascii: "O"): return 0
        default: return alphabet.firstIndex(of: upper).map(UInt8.init)
        }
    }
}

extension SealedBox {
    /// The X25519 key pair `crypto_box_seed_keypair` makes from a 32-byte seed.
    ///
    /// The same seed gives the same pair.
    ///
    /// - Throws: `SecureKeysError.Code.invalidArgument` for a seed that is not 32 bytes.
    public static func keyPair(fromSeed seed: SecureBytes) throws -> (publicKey: [UInt8], privateKey: SecureBytes) {
        Sodium.ensureInitialised()
        guard seed.count == Int(crypto_box_SEEDBYTES) else {
            throw SecureKeysError.invalidArgument("a key pair seed is \(crypto_box_SEEDBYTES) bytes, got \(seed.count)")
        }
        var publicKey = [UInt8](repeating: 0, count: publicKeyLength)
        let privateKey = try SecureBytes(count: privateKeyLength)
        try seed.withUnsafeBytes { seedBytes in
            privateKey.unsafeWithMutableBytes { secret in
                _ = crypto_box_seed_keypair(
                    &publicKey, secret.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    seedBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return (publicKey, privateKey)
    }
}
