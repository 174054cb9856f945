internal import CSodium

/// Wraps a key under another with XChaCha20-Poly1305 (`crypto_aead_xchacha20poly1305_ietf_*`).
///
/// The file header goes in as associated data, so a wrapped key cannot be moved to another header (another
/// class, another format version) without failing authentication. The 24-byte nonce is random: XChaCha20's
/// extended nonce makes random nonces safe (libsodium docs, "XChaCha20-Poly1305 construction").
public enum KeyWrap: Sendable {
    /// `crypto_aead_xchacha20poly1305_ietf_NPUBBYTES`.
    public static let nonceLength = 24
    /// `crypto_aead_xchacha20poly1305_ietf_ABYTES`.
    public static let tagLength = 16
    /// The wrapping key length (`crypto_aead_xchacha20poly1305_ietf_KEYBYTES`).
    public static let keyLength = 32

    /// The length of a wrapped secret of `secretLength` bytes.
    ///
    /// It is nonce ‖ ciphertext ‖ tag.
    public static func wrappedLength(secretLength: Int) -> Int { nonceLength + secretLength + tagLength }

    /// Encrypts `secret` under `key`.
    ///
    /// - Returns: nonce ‖ ciphertext ‖ tag. It is not secret.
    /// - Throws: `SecureKeysError.Code.keyWiped` when either key was wiped.
    public static func wrap(
        _ secret: SecureBytes, with key: SecureBytes, associatedData: [UInt8],
        random: any RandomSource = SystemRandom()
    ) throws -> [UInt8] {
        Sodium.ensureInitialised()
        precondition(key.count == keyLength, "KeyWrap keys are 32 bytes")
        var output = random.bytes(count: nonceLength)
        output += [UInt8](repeating: 0, count: secret.count + tagLength)
        try secret.withUnsafeBytes { plaintext in
            try key.withUnsafeBytes { keyBytes in
                output.withUnsafeMutableBufferPointer { out in
                    var written: UInt64 = 0
                    _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                        out.baseAddress! + nonceLength, &written,
                        plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
                        associatedData, UInt64(associatedData.count), nil,
                        out.baseAddress!, keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        return output
    }

    /// Decrypts a wrapped secret straight into guarded memory.
    ///
    /// - Returns: the secret, or `nil` when authentication fails: the wrong key, other associated data, or
    ///   altered bytes. Callers decide what that means (wrong passcode, damaged file).
    /// - Throws: `SecureKeysError.Code.keyWiped` when `key` was wiped.
    public static func unwrap(
        _ wrapped: ArraySlice<UInt8>, with key: SecureBytes, associatedData: [UInt8]
    ) throws -> SecureBytes? {
        Sodium.ensureInitialised()
        precondition(key.count == keyLength, "KeyWrap keys are 32 bytes")
        guard wrapped.count >= nonceLength + tagLength else { return nil }
        let secret = try SecureBytes(count: wrapped.count - nonceLength - tagLength)
        let status = try key.withUnsafeBytes { keyBytes in
            wrapped.withUnsafeBufferPointer { input in
                secret.unsafeWithMutableBytes { out in
                    var written: UInt64 = 0
                    return crypto_aead_xchacha20poly1305_ietf_decrypt(
                        out.baseAddress!.assumingMemoryBound(to: UInt8.self), &written, nil,
                        input.baseAddress! + nonceLength, UInt64(input.count - nonceLength),
                        associatedData, UInt64(associatedData.count),
                        input.baseAddress!, keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self))
                }
            }
        }
        guard status == 0 else {
            secret.wipe()
            return nil
        }
        return secret
    }
}
