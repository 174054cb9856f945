internal import CSodium

/// Turns a passcode into a 32-byte key with Argon2id (`crypto_pwhash`, `crypto_pwhash_ALG_ARGON2ID13`).
///
/// The cost is the brake on guessing: every passcode try pays it. The parameters and the 16-byte salt are
/// stored in the keybag beside the wrapped keys, so they can be raised later without breaking old keybags.
public struct PasscodeKDF: Sendable, Hashable {
    /// Argon2id passes over memory (`opslimit`).
    public var opsLimit: UInt64
    /// Argon2id memory in bytes (`memlimit`).
    public var memLimit: UInt64

    /// The salt length libsodium requires (`crypto_pwhash_SALTBYTES`).
    public static let saltLength = 16
    /// The derived key length.
    public static let keyLength = 32

    /// libsodium's INTERACTIVE level (2 passes, 64 MiB).
    ///
    /// It takes 83 ms per try on the project's 2-core machine, the closest of the levels to the ~80 ms Apple
    /// states for a passcode try.
    public static let `default` = PasscodeKDF(opsLimit: 2, memLimit: 64 << 20)

    /// The smallest cost libsodium accepts (1 pass, 8 KiB).
    ///
    /// For tests and simulations only, as it makes a passcode guessable in microseconds.
    public static let minimal = PasscodeKDF(opsLimit: 1, memLimit: 8 << 10)

    /// The largest memory limit a keybag may ask for.
    ///
    /// A larger value in a file is treated as damage.
    public static let maximumMemLimit: UInt64 = 1 << 30

    /// An Argon2id cost.
    ///
    /// - Parameters:
    ///   - opsLimit: the number of passes (libsodium's `opslimit`).
    ///   - memLimit: the memory used, in bytes (libsodium's `memlimit`).
    public init(opsLimit: UInt64, memLimit: UInt64) {
        self.opsLimit = opsLimit
        self.memLimit = memLimit
    }

    /// Whether libsodium accepts these parameters and they are within ``maximumMemLimit``.
    public var isValid: Bool {
        opsLimit >= UInt64(crypto_pwhash_argon2id_opslimit_min())
            && opsLimit <= UInt64(UInt32.max)
            && memLimit >= UInt64(crypto_pwhash_argon2id_memlimit_min())
            && memLimit <= Self.maximumMemLimit
    }

    /// Derives the passcode key.
    ///
    /// - Parameters:
    ///   - passcode: the passcode's bytes, in guarded memory.
    ///   - salt: ``saltLength`` random bytes stored with the keybag.
    /// - Returns: the 32-byte passcode key, in guarded memory.
    /// - Throws: `SecureKeysError.Code.invalidArgument` for a bad salt or parameters,
    ///   `SecureKeysError.Code.outOfMemory` when Argon2id cannot allocate its memory.
    public func deriveKey(from passcode: SecureBytes, salt: [UInt8]) throws -> SecureBytes {
        Sodium.ensureInitialised()
        guard salt.count == Self.saltLength else {
            throw SecureKeysError.invalidArgument("the passcode salt must be \(Self.saltLength) bytes, got \(salt.count)")
        }
        guard isValid else {
            throw SecureKeysError.invalidArgument("Argon2id parameters out of range (opslimit \(opsLimit), memlimit \(memLimit))")
        }
        let key = try SecureBytes(count: Self.keyLength)
        let status = try passcode.withUnsafeBytes { passcodeBytes in
            key.unsafeWithMutableBytes { output in
                crypto_pwhash(
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(output.count),
                    passcodeBytes.baseAddress!.assumingMemoryBound(to: CChar.self), UInt64(passcodeBytes.count),
                    salt, opsLimit, Int(memLimit), crypto_pwhash_ALG_ARGON2ID13)
            }
        }
        guard status == 0 else {
            key.wipe()
            throw SecureKeysError.outOfMemory("Argon2id could not allocate \(memLimit) bytes")
        }
        return key
    }
}
