internal import CSodium

/// Derives one key from another with keyed BLAKE2b-256 (`crypto_generichash`) and a label that says what
/// the result is for, so no key is ever used for two purposes.
public enum KeyDerivation: Sendable {
    /// The length of every derived key.
    public static let keyLength = 32

    /// Derives a key for `label` from `key`, mixing in `input`.
    ///
    /// The result is BLAKE2b-256(key: `key`, message: UTF-8(`label`) ‖ `input`).
    ///
    /// - Parameters:
    ///   - label: a fixed, versioned purpose string, e.g. `"ProtectedStore.keybag.kek.v1"`.
    ///   - key: the key to derive from (16 to 64 bytes, BLAKE2b's key range).
    ///   - input: more secret input to mix in, or `nil`.
    /// - Throws: `SecureKeysError.Code.keyWiped` when `key` or `input` was wiped.
    public static func derive(label: String, from key: SecureBytes, mixing input: SecureBytes? = nil) throws -> SecureBytes {
        Sodium.ensureInitialised()
        precondition((16...64).contains(key.count), "BLAKE2b keys are 16 to 64 bytes")
        let labelBytes = Array(label.utf8)
        let output = try SecureBytes(count: keyLength)
        guard let input else {
            // The message is the label alone, which is not secret: it needs no guarded copy.
            try labelBytes.withUnsafeBytes { try hash($0, key: key, into: output) }
            return output
        }
        // One-shot hashing of label ‖ input, assembled in guarded memory (the streaming state is an aligned
        // C struct Swift cannot allocate on the stack).
        let message = try SecureBytes(count: labelBytes.count + input.count)
        defer { message.wipe() }
        try message.withUnsafeMutableBytes { out in
            out.copyBytes(from: labelBytes)
            try input.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[labelBytes.count...]).copyMemory(from: $0) }
        }
        try message.withUnsafeBytes { try hash($0, key: key, into: output) }
        return output
    }

    /// Keyed BLAKE2b-256 of `message` into `output`, which this module just allocated.
    private static func hash(_ message: UnsafeRawBufferPointer, key: SecureBytes, into output: SecureBytes) throws {
        try key.withUnsafeBytes { keyBytes in
            output.unsafeWithMutableBytes { out in
                _ = crypto_generichash(
                    out.baseAddress!.assumingMemoryBound(to: UInt8.self), keyLength,
                    message.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(message.count),
                    keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self), keyBytes.count)
            }
        }
    }

    /// Keyed BLAKE2b-256 of public bytes, as an integrity tag.
    public static func authenticationTag(for message: ArraySlice<UInt8>, key: SecureBytes) throws -> [UInt8] {
        Sodium.ensureInitialised()
        var tag = [UInt8](repeating: 0, count: keyLength)
        try key.withUnsafeBytes { keyBytes in
            message.withUnsafeBufferPointer { messageBytes in
                _ = crypto_generichash(
                    &tag, keyLength, messageBytes.baseAddress, UInt64(messageBytes.count),
                    keyBytes.baseAddress!.assumingMemoryBound(to: UInt8.self), keyBytes.count)
            }
        }
        return tag
    }

    /// Unkeyed BLAKE2b of public bytes, truncated to `length`.
    ///
    /// It is a checksum against accidental damage.
    public static func checksum(of message: ArraySlice<UInt8>, length: Int = 16) -> [UInt8] {
        Sodium.ensureInitialised()
        var digest = [UInt8](repeating: 0, count: length)
        message.withUnsafeBufferPointer { messageBytes in
            _ = crypto_generichash(&digest, length, messageBytes.baseAddress, UInt64(messageBytes.count), nil, 0)
        }
        return digest
    }

    /// Constant-time equality of two public byte strings of the same length (tags, checksums).
    public static func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        lhs.count == rhs.count && sodium_memcmp(lhs, rhs, lhs.count) == 0
    }
}
