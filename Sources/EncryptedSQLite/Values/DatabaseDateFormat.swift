internal import Foundation

/// SQLite's date and time text, `yyyy-MM-dd HH:mm:ss.SSS` in UTC.
///
/// It is written and read without a `DateFormatter`, which costs microseconds a value and is not safe to share
/// between threads on every platform. A list of a thousand dated rows should not spend its time formatting.
enum DatabaseDateFormat {
    /// The proleptic Gregorian calendar in UTC, the one SQLite's date functions use.
    private static let calendar: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    static func string(from date: Date) -> String {
        // Whole milliseconds, rounded down, so that a value and its text sort the same way.
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded(.down)
        let wholeSeconds = (milliseconds / 1000).rounded(.down)
        let fraction = Int(milliseconds - wholeSeconds * 1000)
        let parts = civilParts(ofSecondsSince1970: wholeSeconds)
            ?? calendar.dateComponents(
                [.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: wholeSeconds))
        var text = ""
        text.reserveCapacity(23)
        append(parts.year ?? 0, digits: 4, to: &text)
        text.append("-")
        append(parts.month ?? 0, digits: 2, to: &text)
        text.append("-")
        append(parts.day ?? 0, digits: 2, to: &text)
        text.append(" ")
        append(parts.hour ?? 0, digits: 2, to: &text)
        text.append(":")
        append(parts.minute ?? 0, digits: 2, to: &text)
        text.append(":")
        append(parts.second ?? 0, digits: 2, to: &text)
        text.append(".")
        append(fraction, digits: 3, to: &text)
        return text
    }

    /// The year, month, day, hour, minute and second in UTC of `seconds` since 1970 (whole), worked out by
    /// arithmetic on days in the Gregorian calendar; `nil` before 1582-10-15 or from the year 10000 on, which are
    /// left to `calendar` (Foundation's switches to the Julian calendar before 1582-10-15).
    ///
    /// `Calendar.dateComponents` cost tens of microseconds a date, which every date written (a migration's
    /// record among them) paid.
    private static func civilParts(ofSecondsSince1970 seconds: Double) -> DateComponents? {
        // 1582-10-15 and 10000-01-01, in seconds since 1970.
        guard seconds >= -12_219_292_800, seconds < 253_402_300_800 else { return nil }
        let whole = Int64(seconds)
        let days = whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400
        let secondOfDay = whole - days * 86_400
        // Days since 0000-03-01, in eras of 400 years (146,097 days), each from March: February last.
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return DateComponents(
            year: Int(year), month: Int(month), day: Int(day), hour: Int(secondOfDay / 3_600),
            minute: Int(secondOfDay % 3_600 / 60), second: Int(secondOfDay % 60))
    }

    /// Reads a date in UTC, or `nil` for anything else.
    ///
    /// It reads `yyyy-MM-dd HH:mm[:ss[.SSS…]]`, with a space or `T` between date and time, or a bare `yyyy-MM-dd`
    /// (midnight), all UTC.
    static func date(from text: String) -> Date? {
        let bytes = Array(text.utf8)
        var index = 0
        func number(_ digits: Int) -> Int? {
            guard index + digits <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[index..<index + digits] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
            }
            index += digits
            return value
        }
        func expect(_ separator: UInt8...) -> Bool {
            guard index < bytes.count, separator.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        var parts = DateComponents(calendar: calendar, timeZone: calendar.timeZone)
        guard let year = number(4), expect(UInt8(ascii: "-")), let month = number(2), expect(UInt8(ascii: "-")),
            let day = number(2)
        else { return nil }
        (parts.year, parts.month, parts.day) = (year, month, day)
        var fraction = 0.0
        if index < bytes.count {
            guard expect(UInt8(ascii: " "), UInt8(ascii: "T")), let hour = number(2), expect(UInt8(ascii: ":")),
                let minute = number(2)
            else { return nil }
            (parts.hour, parts.minute) = (hour, minute)
            if index < bytes.count {
                guard expect(UInt8(ascii: ":")), let second = number(2) else { return nil }
                parts.second = second
                if index < bytes.count {
                    guard expect(UInt8(ascii: ".")), index < bytes.count else { return nil }
                    // Whole digits first, one division at the end: `.125` is exactly 0.125 seconds.
                    var digits = 0
                    var scale = 1.0
                    while index < bytes.count {
                        let byte = bytes[index]
                        guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                        if scale < 1e9 {
                            digits = digits * 10 + Int(byte - UInt8(ascii: "0"))
                            scale *= 10
                        }
                        index += 1
                    }
                    fraction = Double(digits) / scale
                }
            }
        }
        guard let date = calendar.date(from: parts), calendar.component(.day, from: date) == day else { return nil }
        return date.addingTimeInterval(fraction)
    }

    private static func append(_ value: Int, digits: Int, to text: inout String) {
        let string = String(value)
        if string.count < digits { text.append(String(repeating: "0", count: digits - string.count)) }
        text.append(string)
    }
}
