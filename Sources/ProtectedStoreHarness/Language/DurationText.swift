/// Durations as scripts write them, a whole number and a unit.
///
/// For example `500ms`, `10s`, `5m` or `1h`.
public enum DurationText: Sendable {
    /// Parses `text`, or returns `nil` when it is not a duration.
    public static func parse(_ text: String) -> Duration? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)]
        for (unit, milliseconds) in units where text.hasSuffix(unit) {
            let number = text.dropLast(unit.count)
            // "5ms" also ends in "s": only accept the longest unit whose prefix is all digits.
            guard !number.isEmpty, number.allSatisfy(\.isASCII), number.allSatisfy(\.isNumber), let value = Int64(number),
                value <= Int64.max / milliseconds
            else { continue }
            return .milliseconds(value * milliseconds)
        }
        return nil
    }
}
