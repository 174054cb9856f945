import ArgumentParser

/// How the numeric options read their value.
///
/// The value is a whole number, a negative one included.
///
/// Read with ArgumentParser's default, `--seeds -5` took `-5` for an option and said "Missing value", and a
/// number too large for the type said "invalid" without the range. Read unconditionally (the word after the
/// option is its value, whatever it starts with) and through this transform, a negative number reaches
/// `validate()`, which names the option and the lowest value it takes; a number past the type's range is
/// refused with the range.
enum WholeNumberOption {
    /// A value that is no whole number in `range`.
    struct Invalid: Error, CustomStringConvertible {
        let description: String
    }

    /// The transform for an option of type `T` that takes values in `range`.
    ///
    /// A number `T` can hold is returned even outside `range` (the command's `validate()` says what the option
    /// takes); one it cannot hold, or a word that is no number, throws ``Invalid`` naming the range.
    static func transform<T: FixedWidthInteger & Sendable>(_ range: ClosedRange<T>) -> @Sendable (String) throws -> T {
        { text in
            if let value = T(text) { return value }
            let digits = text.hasPrefix("-") || text.hasPrefix("+") ? text.dropFirst() : Substring(text)
            let isNumber = !digits.isEmpty && digits.allSatisfy { $0.isASCII && $0.isNumber }
            let what = isNumber ? "out of range" : "not a whole number"
            throw Invalid(description: "\(what): it takes a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
    }
}
