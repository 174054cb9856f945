public import Foundation

/// A Swift value that is stored in one column.
///
/// It converts to a ``DatabaseValue`` and back.
///
/// Conforming types are what ``StatementArguments`` binds and what ``Row`` and the record decoder read:
/// integers, `Double`, `Float`, `String`, `Bool`, `Data`, `[UInt8]`, `Date`, `UUID`, ``DatabaseValue``
/// itself, and `Optional`s of them (SQL `NULL` for `nil`). How each is stored:
///
/// | Swift | column | read back from |
/// |---|---|---|
/// | integers, `Bool` | INTEGER | INTEGER; REAL with an integral value |
/// | `Double`, `Float` | REAL | REAL, INTEGER |
/// | `String` | TEXT | TEXT |
/// | `Data`, `[UInt8]` | BLOB | BLOB, TEXT (its UTF-8) |
/// | `Date` | TEXT `yyyy-MM-dd HH:mm:ss.SSS`, UTC — SQLite's own date format, as GRDB stores it | that TEXT; REAL or INTEGER seconds since 1970 |
/// | `UUID` | BLOB of 16 bytes | that BLOB; TEXT in the 8-4-4-4-12 form |
public protocol DatabaseValueConvertible: Sendable {
    /// The value as stored.
    var databaseValue: DatabaseValue { get }
    /// The value read back from `databaseValue`, or `nil` when it does not convert (a ``DatabaseValue/null``
    /// converts to `nil` for every type but `Optional` and ``DatabaseValue``).
    static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Self?
}

extension DatabaseValue: DatabaseValueConvertible {
    /// Itself.
    public var databaseValue: DatabaseValue { self }
    /// `databaseValue` itself.
    ///
    /// Every stored value converts, `NULL` included.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> DatabaseValue? { databaseValue }
}

extension Optional: DatabaseValueConvertible where Wrapped: DatabaseValueConvertible {
    /// ``DatabaseValue/null`` for `nil`, the wrapped value's otherwise.
    public var databaseValue: DatabaseValue { self?.databaseValue ?? .null }
    /// The wrapped value for what converts, and `nil` for what does not.
    ///
    /// `.some(nil)` for `NULL`.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Wrapped?? {
        if case .null = databaseValue { return .some(nil) }
        return Wrapped.fromDatabaseValue(databaseValue).map { .some($0) }
    }
}

// MARK: Integers and Bool

extension DatabaseValueConvertible where Self: FixedWidthInteger {
    /// The value as ``DatabaseValue/integer(_:)``.
    ///
    /// An unsigned value above `Int64.max` (only `UInt64` and `UInt` have one) is stored as REAL instead of
    /// wrapping around, and reads back only if it fits.
    public var databaseValue: DatabaseValue {
        if let integer = Int64(exactly: self) { return .integer(integer) }
        return .real(Double(self))
    }

    /// The integer when it fits this type.
    ///
    /// A REAL converts when its value is integral and fits.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Self? {
        switch databaseValue {
        case .integer(let integer): Self(exactly: integer)
        case .real(let real): Self(exactly: real)
        default: nil
        }
    }
}

extension Int: DatabaseValueConvertible {}
extension Int8: DatabaseValueConvertible {}
extension Int16: DatabaseValueConvertible {}
extension Int32: DatabaseValueConvertible {}
extension Int64: DatabaseValueConvertible {}
extension UInt: DatabaseValueConvertible {}
extension UInt8: DatabaseValueConvertible {}
extension UInt16: DatabaseValueConvertible {}
extension UInt32: DatabaseValueConvertible {}
extension UInt64: DatabaseValueConvertible {}

extension Bool: DatabaseValueConvertible {
    /// `1` or `0`.
    public var databaseValue: DatabaseValue { .integer(self ? 1 : 0) }
    /// Any non-zero number is `true`, as in SQL.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Bool? {
        switch databaseValue {
        case .integer(let integer): integer != 0
        case .real(let real): real != 0
        default: nil
        }
    }
}

// MARK: Floating point

extension Double: DatabaseValueConvertible {
    /// ``DatabaseValue/real(_:)``.
    public var databaseValue: DatabaseValue { .real(self) }
    /// A REAL, or an INTEGER converted.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Double? { databaseValue.double }
}

extension Float: DatabaseValueConvertible {
    /// ``DatabaseValue/real(_:)``.
    public var databaseValue: DatabaseValue { .real(Double(self)) }
    /// A REAL, or an INTEGER converted.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Float? { databaseValue.double.map(Float.init) }
}

// MARK: Text and bytes

extension String: DatabaseValueConvertible {
    /// ``DatabaseValue/text(_:)``.
    public var databaseValue: DatabaseValue { .text(self) }
    /// The text of a TEXT value only.
    ///
    /// A number is not silently turned into a string.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> String? { databaseValue.string }
}

extension Data: DatabaseValueConvertible {
    /// ``DatabaseValue/blob(_:)``.
    public var databaseValue: DatabaseValue { .blob(Array(self)) }
    /// A BLOB, or the UTF-8 bytes of a TEXT.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Data? {
        switch databaseValue {
        case .blob(let bytes): Data(bytes)
        case .text(let text): Data(text.utf8)
        default: nil
        }
    }
}

extension Array: DatabaseValueConvertible where Element == UInt8 {
    /// ``DatabaseValue/blob(_:)``.
    public var databaseValue: DatabaseValue { .blob(self) }
    /// A BLOB, or the UTF-8 bytes of a TEXT.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> [UInt8]? {
        switch databaseValue {
        case .blob(let bytes): bytes
        case .text(let text): Array(text.utf8)
        default: nil
        }
    }
}

// MARK: Date and UUID

extension Date: DatabaseValueConvertible {
    /// TEXT `yyyy-MM-dd HH:mm:ss.SSS` in UTC.
    ///
    /// It sorts in time order, and SQLite's date functions read it. Milliseconds are kept; finer fractions are
    /// rounded down, as GRDB does.
    public var databaseValue: DatabaseValue { .text(DatabaseDateFormat.string(from: self)) }
    /// The date from that TEXT, or from REAL or INTEGER seconds since 1970.
    ///
    /// The TEXT may also be without the fraction, or with `T` between date and time. The seconds are a Unix
    /// timestamp.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> Date? {
        switch databaseValue {
        case .text(let text): DatabaseDateFormat.date(from: text)
        case .integer(let seconds): Date(timeIntervalSince1970: Double(seconds))
        case .real(let seconds): Date(timeIntervalSince1970: seconds)
        default: nil
        }
    }
}

extension UUID: DatabaseValueConvertible {
    /// A 16-byte BLOB.
    public var databaseValue: DatabaseValue {
        withUnsafeBytes(of: uuid) { .blob(Array($0)) }
    }
    /// A 16-byte BLOB, or TEXT in the usual 8-4-4-4-12 hexadecimal form.
    public static func fromDatabaseValue(_ databaseValue: DatabaseValue) -> UUID? {
        switch databaseValue {
        case .blob(let bytes) where bytes.count == 16:
            var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
            withUnsafeMutableBytes(of: &uuid) { $0.copyBytes(from: bytes) }
            return UUID(uuid: uuid)
        case .text(let text): return UUID(uuidString: text)
        default: return nil
        }
    }
}
