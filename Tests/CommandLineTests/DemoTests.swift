import Foundation
import Testing

@Suite("protected-store demo", .timeLimit(.minutes(3)))
struct DemoTests {
    /// Terminal columns `line` takes: one per character, two for an emoji shown as a picture.
    static func columns(_ line: Substring) -> Int {
        line.reduce(0) { $0 + ($1.unicodeScalars.first?.properties.isEmojiPresentation == true ? 2 : 1) }
    }

    @Test("the demo exits 0 and every line it prints fits 100 columns")
    func demoFitsOneHundredColumns() throws {
        let result = try ProtectedStoreBinary.run(["demo"])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.output.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count > 50, "the demo printed its steps")
        for (number, line) in lines.enumerated() where Self.columns(line) > 100 {
            Issue.record("line \(number + 1) is \(Self.columns(line)) columns wide: \(line)")
        }
        #expect(result.error.isEmpty, "\(result.error)")
    }

    @Test("the demo says in plain words what the phone is doing and why the store waits, and leaves no plaintext")
    func demoExplainsEachStep() throws {
        let result = try ProtectedStoreBinary.run(["demo"])
        #expect(result.status == 0, "\(result.error)")
        let text = result.output.replacingOccurrences(of: "\n          ", with: " ")
        for phrase in [
            "$ app launch --background --reason location",
            "The phone restarted and nobody has typed the passcode yet, so the key that decrypts the store does not exist in memory",
            "finds the store key locked", "no error is shown, and the store waits",
            "phone: restarted, passcode not typed yet · store: waiting · UI: disabled · queued: 3",
            "tells the app that protected data did become available", "↳ inbox: merged 1 record",
            "last-location = 48.8606,2.3376", "the queued UI operations ran, in order",
            "The grace period is over", "phone: locked, keys wiped",
        ] {
            #expect(text.contains(phrase), "missing: \(phrase)")
        }
        #expect(!result.output.contains("PLAINTEXT"))
        #expect(!result.output.contains("123456"), "the demo's passcode is not shown")
    }
}
