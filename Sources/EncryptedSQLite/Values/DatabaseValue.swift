/// A value stored in or read from a column.
public enum DatabaseValue: Sendable, Hashable {
    /// SQL `NULL`.
    case null
    /// A 64-bit integer.
    case integer(Int64)
    /// A double-precision floating-point number.
    case real(Double)
    /// UTF-8 text.
    case text(String)
    /// Bytes.
    case blob([UInt8])

    /// The integer, or `nil` for any other kind.
    public var int64: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// The real number (integers are converted), or `nil`.
    public var double: Double? {
        switch self {
        case .real(let value): value
        case .integer(let value): Double(value)
        default: nil
        }
    }

    /// The text, or `nil` for any other kind.
    public var string: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    /// The bytes of a blob, or `nil` for any other kind.
    public var blob: [UInt8]? {
        if case .blob(let value) = self { return value }
        return nil
    }

    /// Whether this is SQL NULL.
    public var isNull: Bool { self == .null }
}

extension DatabaseValue: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral, ExpressibleByFloatLiteral,
    ExpressibleByNilLiteral
{
    /// ``integer(_:)`` from an integer literal.
    public init(integerLiteral value: Int64) { self = .integer(value) }
    /// ``text(_:)`` from a string literal.
    public init(stringLiteral value: String) { self = .text(value) }
    /// ``real(_:)`` from a floating-point literal.
    public init(floatLiteral value: Double) { self = .real(value) }
    /// ``null`` from `nil`.
    public init(nilLiteral: ()) { self = .null }
}
