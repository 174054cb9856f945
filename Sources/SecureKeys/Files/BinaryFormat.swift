/// Reads little-endian fields from an untrusted byte string, failing cleanly instead of trapping.
package struct ByteReader {
    private let bytes: [UInt8]
    /// The offset of the next unread byte.
    package private(set) var offset: Int

    package init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    /// How many bytes are left.
    package var remaining: Int { bytes.count - offset }

    /// The next `count` bytes, or `nil` when fewer are left.
    package mutating func read(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    package mutating func readUInt8() -> UInt8? { read(1)?.first }

    package mutating func readUInt16() -> UInt16? { readInteger(UInt16.self) }

    package mutating func readUInt32() -> UInt32? { readInteger(UInt32.self) }

    package mutating func readUInt64() -> UInt64? { readInteger(UInt64.self) }

    private mutating func readInteger<T: FixedWidthInteger>(_: T.Type) -> T? {
        guard let slice = read(MemoryLayout<T>.size) else { return nil }
        return slice.reversed().reduce(T(0)) { ($0 << 8) | T($1) }
    }
}

/// Writes little-endian fields.
package struct ByteWriter {
    /// What has been written.
    package private(set) var bytes: [UInt8] = []

    package init() {}

    package mutating func write<S: Sequence>(_ more: S) where S.Element == UInt8 { bytes.append(contentsOf: more) }

    package mutating func write(_ value: UInt8) { bytes.append(value) }

    package mutating func write(_ value: UInt16) { writeInteger(value) }

    package mutating func write(_ value: UInt32) { writeInteger(value) }

    package mutating func write(_ value: UInt64) { writeInteger(value) }

    /// A u32 length and the text's UTF-8 bytes.
    package mutating func writeText(_ text: String) {
        write(UInt32(text.utf8.count))
        write(text.utf8)
    }

    /// Zeroes what was written (it may be a secret's plaintext).
    package mutating func wipe() {
        secureZero(&bytes)
    }

    private mutating func writeInteger<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }
}

/// The frame the store key file and the inbox key file share.
///
/// It has magic, a version byte, a fixed length, and a 16-byte unkeyed BLAKE2b checksum at the end. The
/// checksum is checked without any key, so damage is told apart from a key that does not fit even while the
/// device is locked.
enum ChecksummedFile {
    static let checksumLength = 16

    /// Checks the frame of a `kind` file (for messages) and returns its bytes unchanged.
    ///
    /// - Throws: `SecureKeysError.Code.keyFileDamaged` or `SecureKeysError.Code.unsupportedKeyFormat`.
    static func verify(
        _ bytes: [UInt8], kind: String, magic: [UInt8], version: UInt8, length: Int, path: String?
    ) throws {
        try verify(bytes, kind: kind, magic: magic, versions: [version], length: length, path: path)
    }

    /// Checks the frame of a `kind` file of any of `versions`, all of them `length` bytes long.
    static func verify(
        _ bytes: [UInt8], kind: String, magic: [UInt8], versions: [UInt8], length: Int, path: String?
    ) throws {
        let version = versions.last!
        guard bytes.count >= magic.count + 1 else {
            throw SecureKeysError.damaged("\(kind) is \(bytes.count) bytes, a v\(version) file is \(length)", path: path)
        }
        guard Array(bytes[0..<magic.count]) == magic else {
            throw SecureKeysError.damaged("not a \(kind) (bad magic)", path: path)
        }
        guard versions.contains(bytes[magic.count]) else {
            let readable = versions.map { "\($0)" }.joined(separator: " or ")
            throw SecureKeysError.unsupportedFormat(
                "\(kind) version \(bytes[magic.count]); this build reads version \(readable)", path: path)
        }
        guard bytes.count == length else {
            throw SecureKeysError.damaged(
                "\(kind) is \(bytes.count) bytes, a v\(bytes[magic.count]) file is \(length)", path: path)
        }
        let body = bytes[..<(length - checksumLength)]
        guard KeyDerivation.constantTimeEquals(KeyDerivation.checksum(of: body, length: checksumLength), Array(bytes[body.endIndex...]))
        else { throw SecureKeysError.damaged("\(kind) checksum mismatch (truncated or altered)", path: path) }
    }

    /// Appends the checksum of everything written so far.
    static func seal(_ writer: inout ByteWriter) {
        writer.write(KeyDerivation.checksum(of: writer.bytes[...], length: checksumLength))
    }
}
