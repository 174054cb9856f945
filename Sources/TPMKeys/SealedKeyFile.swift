import ProtectedData
import SecureKeys

/// The sealed device key file, `hardware/uid.tpm`, version 1.
///
/// Its format is in <doc:/SecureKeys/KeyFileFormats>, "Sealed device key". It holds the TPM's sealed object (its public area and its
/// private area, which the TPM encrypted under its primary storage key) and the name of that primary key, so a file
/// from another TPM is told apart from a damaged one.
///
/// | offset | size | field |
/// | ---: | ---: | --- |
/// | 0 | 4 | magic `PSTK` |
/// | 4 | 1 | format version `1` |
/// | 5 | 1 | parent: `1`, the owner hierarchy's ECC P-256 storage key of the fixed template |
/// | 6 | 2 | `N`, the primary key's name length (at most 66) |
/// | 8 | 2 | `P`, the public area's length |
/// | 10 | 2 | `Q`, the private area's length |
/// | 12 | 4 | reserved, 0 |
/// | 16 | N | the primary key's TPM name |
/// | 16 + N | P | `TPM2B_PUBLIC`, TPM-marshalled (big-endian) |
/// | 16 + N + P | Q | `TPM2B_PRIVATE`, TPM-marshalled |
/// | 16 + N + P + Q | 16 | checksum `H16` of everything before it |
///
/// Nothing in it is secret without the TPM: the private area is encrypted by a key that never leaves it.
struct SealedKeyFile: Equatable {
    static let magic: [UInt8] = Array("PSTK".utf8)
    static let version: UInt8 = 1
    static let ownerStorageKeyParent: UInt8 = 1
    static let headerLength = 16
    static let checksumLength = 16
    /// A name is a 2-byte hash algorithm and a digest of at most 64 bytes (SHA-512).
    static let maximumNameLength = 66
    /// A whole file is far below this length.
    ///
    /// A TPM buffer is at most a few kilobytes.
    static let maximumLength = 4096

    var sealed: TPMConnection.Sealed

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.sealed.primaryName == rhs.sealed.primaryName && lhs.sealed.publicArea == rhs.sealed.publicArea
            && lhs.sealed.privateArea == rhs.sealed.privateArea
    }

    /// The file's bytes.
    var bytes: [UInt8] {
        var writer = ByteWriter()
        writer.write(Self.magic)
        writer.write(Self.version)
        writer.write(Self.ownerStorageKeyParent)
        writer.write(UInt16(sealed.primaryName.count))
        writer.write(UInt16(sealed.publicArea.count))
        writer.write(UInt16(sealed.privateArea.count))
        writer.write(UInt32(0))
        writer.write(sealed.primaryName)
        writer.write(sealed.publicArea)
        writer.write(sealed.privateArea)
        writer.write(KeyDerivation.checksum(of: writer.bytes[...], length: Self.checksumLength))
        return writer.bytes
    }

    init(sealed: TPMConnection.Sealed) { self.sealed = sealed }

    /// Parses a file read from `path`, or a record of the same format (a keybag's sealed passcode secret).
    ///
    /// - Parameters:
    ///   - bytes: the file's or record's bytes.
    ///   - path: where they were read, for messages.
    ///   - kind: what they hold, for messages.
    /// - Throws: `SecureKeysError` with `key-file-damaged` (length, magic, fields, checksum) or
    ///   `unsupported-key-format` (version, parent), naming `path`.
    init(decoding bytes: [UInt8], path: String, kind: String = "sealed device key") throws {
        guard bytes.count >= Self.headerLength + Self.checksumLength else {
            throw SecureKeysError.damaged("\(kind) is \(bytes.count) bytes, shorter than its header", path: path)
        }
        guard Array(bytes[0..<4]) == Self.magic else { throw SecureKeysError.damaged("not a \(kind) (bad magic)", path: path) }
        guard bytes[4] == Self.version else {
            throw SecureKeysError.unsupportedFormat("\(kind) version \(bytes[4]); this build reads version \(Self.version)", path: path)
        }
        let body = bytes[..<(bytes.count - Self.checksumLength)]
        guard KeyDerivation.constantTimeEquals(
            KeyDerivation.checksum(of: body, length: Self.checksumLength), Array(bytes[body.endIndex...]))
        else { throw SecureKeysError.damaged("\(kind) checksum mismatch (truncated or altered)", path: path) }
        guard bytes[5] == Self.ownerStorageKeyParent else {
            throw SecureKeysError.unsupportedFormat("\(kind) under parent \(bytes[5]); this build knows parent 1", path: path)
        }
        var reader = ByteReader(Array(body), offset: 6)
        guard let nameLength = reader.readUInt16(), let publicLength = reader.readUInt16(), let privateLength = reader.readUInt16(),
            reader.readUInt32() == 0, (1...Self.maximumNameLength).contains(Int(nameLength)), publicLength > 0, privateLength > 0,
            reader.remaining == Int(nameLength) + Int(publicLength) + Int(privateLength),
            let name = reader.read(Int(nameLength)), let publicArea = reader.read(Int(publicLength)),
            let privateArea = reader.read(Int(privateLength))
        else { throw SecureKeysError.damaged("\(kind) lengths do not add up to its size", path: path) }
        sealed = TPMConnection.Sealed(primaryName: Array(name), publicArea: Array(publicArea), privateArea: Array(privateArea))
    }
}
