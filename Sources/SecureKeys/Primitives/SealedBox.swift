internal import CSodium

/// Anonymous public-key encryption (`crypto_box_seal`).
///
/// Anyone with the public key can seal, only the holder of the private key can open, and the sender cannot read
/// back what it sealed (libsodium docs, "Sealed boxes").
///
/// This is what lets data be written while the device is locked: the public half of a class-B style key pair
/// is always available, the private half only while unlocked.
public enum SealedBox: Sendable {
    /// `crypto_box_PUBLICKEYBYTES`.
    public static let publicKeyLength = 32
    /// `crypto_box_SECRETKEYBYTES`.
    public static let privateKeyLength = 32
    /// How much longer a sealed message is than its plaintext, `crypto_box_SEALBYTES`.
    public static let overhead = 48

    /// A new X25519 key pair.
    ///
    /// The private key goes straight into guarded memory.
    ///
    /// - Throws: `SecureKeysError.Code.outOfMemory` when the guarded memory cannot be allocated.
    public static func makeKeyPair(random: any RandomSource = SystemRandom()) throws -> (publicKey: [UInt8], privateKey: SecureBytes) {
        Sodium.ensureInitialised()
        let seed = try SecureBytes.random(count: Int(crypto_box_SEEDBYTES), using: random)
        defer { seed.wipe() }
        var publicKey = [UInt8](repeating: 0, count: publicKeyLength)
        let privateKey = try SecureBytes(count: privateKeyLength)
        seed.unsafeWithMutableBytes { seedBytes in
            privateKey.unsafeWithMutableBytes { secret in
                _ = crypto_box_seed_keypair(
                    &publicKey, secret.baseAddress!.assumingMemoryBound(to: UInt8.self),
                    seedBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
        return (publicKey, privateKey)
    }

    /// The public key that belongs to `privateKey` (`crypto_scalarmult_base`).
    public static func publicKey(for privateKey: SecureBytes) throws -> [UInt8] {
        Sodium.ensureInitialised()
        var publicKey = [UInt8](repeating: 0, count: publicKeyLength)
        try privateKey.withUnsafeBytes { secret in
            _ = crypto_scalarmult_base(&publicKey, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return publicKey
    }

    /// Seals `message` to `publicKey`.
    ///
    /// - Throws: `SecureKeysError.Code.invalidArgument` for a public key of the wrong length or one
    ///   libsodium rejects.
    public static func seal(_ message: UnsafeRawBufferPointer, to publicKey: [UInt8]) throws -> [UInt8] {
        Sodium.ensureInitialised()
        guard publicKey.count == publicKeyLength else {
            throw SecureKeysError.invalidArgument("a sealed-box public key is \(publicKeyLength) bytes, got \(publicKey.count)")
        }
        var sealed = [UInt8](repeating: 0, count: message.count + overhead)
        let status = crypto_box_seal(
            &sealed, message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count), publicKey)
        guard status == 0 else { throw SecureKeysError.invalidArgument("the sealed-box public key was rejected") }
        return sealed
    }

    /// Opens a sealed message into guarded memory.
    ///
    /// - Returns: the plaintext, or `nil` when the message was not sealed to this key pair or was altered.
    public static func open(
        _ sealed: ArraySlice<UInt8>, publicKey: [UInt8], privateKey: SecureBytes
    ) throws -> SecureBytes? {
        Sodium.ensureInitialised()
        guard sealed.count >= overhead, publicKey.count == publicKeyLength else { return nil }
        let plaintext = try SecureBytes(count: sealed.count - overhead)
        let status = try privateKey.withUnsafeBytes { secret in
            sealed.withUnsafeBufferPointer { input in
                plaintext.unsafeWithMutableBytes { out in
                    crypto_box_seal_open(
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), input.baseAddress!,
                        UInt64(input.count), publicKey, secret.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        guard status == 0 else {
            plaintext.wipe()
            return nil
        }
        return plaintext
    }

    /// Opens a sealed message into memory the caller provides, with a private key it reads in place.
    ///
    /// The memory is a part of a guarded buffer the caller reuses. There is no allocation and no lock, so several
    /// threads can open at once.
    ///
    /// - Parameters:
    ///   - sealed: the sealed message.
    ///   - plaintext: where the plaintext goes: exactly `sealed.count - overhead` bytes.
    ///   - publicKey: the public key the message was sealed to.
    ///   - privateKey: the private key's bytes.
    /// - Returns: `false` when the message was not sealed to this key pair or was altered (`plaintext` is
    ///   zeroed then).
    package static func open(
        _ sealed: UnsafeRawBufferPointer, into plaintext: UnsafeMutableRawBufferPointer, publicKey: [UInt8],
        privateKey: UnsafeRawBufferPointer
    ) -> Bool {
        Sodium.ensureInitialised()
        guard sealed.count >= overhead, plaintext.count == sealed.count - overhead, publicKey.count == publicKeyLength,
            privateKey.count == privateKeyLength, let input = sealed.baseAddress
        else { return false }
        var scratch: UInt8 = 0
        let status = withUnsafeMutablePointer(to: &scratch) { empty in
            crypto_box_seal_open(
                plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? empty,
                input.assumingMemoryBound(to: UInt8.self), UInt64(sealed.count), publicKey,
                privateKey.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        guard status == 0 else {
            secureZero(plaintext)
            return false
        }
        return true
    }
}
