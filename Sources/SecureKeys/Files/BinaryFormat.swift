/// Reads little-endian fields from an untrusted byte string, failing cleanly instead of trapping.
public struct ByteReader {
    private let bytes: [UInt8]
    /// The offset of the next unread byte.
    public private(set) var offset: Int

    public init(_ bytes: [UInt8], offset: Int = 0) {
        self.bytes = bytes
        self.offset = offset
    }

    /// How many bytes are left.
    public var remaining: Int { bytes.count - offset }

    /// The next `count` bytes, or `nil` when fewer are left.
    public mutating func read(_ count: Int) -> ArraySlice<UInt8>? {
        guard count >= 0, remaining >= count else { return nil }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    public mutating func readUInt8() -> UInt8? { read(1)?.first }

    public mutating func readUInt16() -> UInt16? { readInteger(UInt16.self) }

    public mutating func readUInt32() -> UInt32? { readInteger(UInt32.self) }

    public mutating func readUInt64() -> UInt64? { readInteger(UInt64.self) }

    private mutating func readInteger<T: FixedWidthInteger>(_: T.Type) -> T? {
        guard let slice = read(MemoryLayout<T>.size) else { return nil }
        return slice.reversed().reduce(T(0)) { ($0 << 8) | T($1) }
    }
}

/// Writes little-endian fields.
public struct ByteWriter {
    /// What has been written.
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public mutating func write<S: Sequence>(_ more: S) where S.Element == UInt8 { bytes.append(contentsOf: more) }

    public mutating func write(_ value: UInt8) { bytes.append(value) }

    public mutating func write(_ value: UInt16) { writeInteger(value) }

    public mutating func write(_ value: UInt32) { writeInteger(value) }

    public mutating func write(_ value: UInt64) { writeInteger(value) }

    private mutating func writeInteger<T: FixedWidthInteger>(_ value: T) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }
}
