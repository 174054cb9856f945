import Foundation
import Testing

@testable import EncryptedSQLite

/// The text a `Date` is stored as (`yyyy-MM-dd HH:mm:ss.SSS`, UTC).
@Suite("Date text")
struct DatabaseDateFormatTests {
    /// What `Calendar` says the text is: the reference the arithmetic on days must match.
    static func calendarText(_ date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded(.down)
        let seconds = (milliseconds / 1000).rounded(.down)
        let parts = calendar.dateComponents(
            [.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: seconds))
        func padded(_ value: Int?, _ digits: Int) -> String {
            let text = String(value ?? 0)
            return String(repeating: "0", count: max(0, digits - text.count)) + text
        }
        return "\(padded(parts.year, 4))-\(padded(parts.month, 2))-\(padded(parts.day, 2)) "
            + "\(padded(parts.hour, 2)):\(padded(parts.minute, 2)):\(padded(parts.second, 2))."
            + padded(Int(milliseconds - seconds * 1000), 3)
    }

    @Test("every date from year 1 to 9999 is written as Foundation's calendar says: the edges of years, centuries, leap days, the Gregorian calendar's first day and the Julian one's last, before and after 1970, and 20,000 dates drawn from a seed")
    func matchesTheCalendar() {
        var dates: [Date] = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -1), Date(timeIntervalSince1970: -0.001),
            Date(timeIntervalSince1970: 951_782_400),  // 2000-02-29
            Date(timeIntervalSince1970: -2_203_891_200),  // 1900-03-01
            Date(timeIntervalSince1970: -62_135_596_800),  // 0001-01-01
            Date(timeIntervalSince1970: 253_402_300_799.999),  // 9999-12-31 23:59:59.999
            Date(timeIntervalSince1970: 4_107_542_400),  // 2100-03-01
            Date(timeIntervalSince1970: -12_219_292_800),  // 1582-10-15, the Gregorian calendar's first day
            Date(timeIntervalSince1970: -12_219_292_800.001),  // the Julian calendar's last instant (1582-10-04)
        ]
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        for _ in 0..<20_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let span = 253_402_300_800.0 + 62_135_596_800.0
            dates.append(Date(timeIntervalSince1970: Double(state >> 11) / Double(1 << 53) * span - 62_135_596_800))
        }
        for date in dates {
            #expect(DatabaseDateFormat.string(from: date) == Self.calendarText(date), "\(date.timeIntervalSince1970)")
        }
    }

    @Test("a date outside the years 1582 to 9999 is left to the calendar, and what is written reads back")
    func outsideTheFastRange() {
        for seconds in [-62_135_596_801.0, 253_402_300_800.0, -70_000_000_000.0] {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(DatabaseDateFormat.string(from: date) == Self.calendarText(date))
        }
        let date = Date(timeIntervalSince1970: 1_700_000_000.125)
        #expect(DatabaseDateFormat.date(from: DatabaseDateFormat.string(from: date)) == date)
    }
}
