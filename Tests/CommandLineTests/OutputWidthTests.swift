import Foundation
import TestSupport
import Testing

/// The demo, `run` and `simulate` fit the width `COLUMNS` gives, without splitting a word; into a pipe without
/// `COLUMNS`, `run` and `simulate` keep each line whole (issue 30, item 11).
@Suite("Output fits COLUMNS", .timeLimit(.minutes(3)))
struct OutputWidthTests {
    /// Runs the binary with `COLUMNS` set to `columns`.
    static func run(_ arguments: [String], columns: Int) throws -> ProtectedStoreBinary.Result {
        try ProtectedStoreBinary.run(arguments, executable: "env", argumentsBefore: ["COLUMNS=\(columns)", ProtectedStoreBinary.url.path])
    }

    /// Lines wider than `width` columns, with their numbers.
    static func tooWide(_ output: String, _ width: Int) -> [String] {
        output.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            .filter { DemoTests.columns($0.element) > width }
            .map { "line \($0.offset + 1) is \(DemoTests.columns($0.element)) columns: \($0.element)" }
    }

    /// The words of the demo's output, in order, without what differs from run to run: the temporary folder's
    /// name, the inbox record's random id (32 hex digits), and the size of `owner.lock`, which holds the process
    /// id in decimal (4 digits in one run, 5 in the next, where process ids wrap at 32,768).
    static func words(_ output: String) -> [Substring] {
        let words = output.split(whereSeparator: \.isWhitespace)
        return words.indices.filter { index in
            let word = words[index]
            if index > 0, words[index - 1] == "owner.lock" { return false }
            return !word.hasPrefix("/") && !(word.count == 32 && word.allSatisfy(\.isHexDigit))
        }.map { words[$0] }
    }

    @Test("the demo fits COLUMNS=80 and COLUMNS=100 and says the same words at both: none is split")
    func demoFitsColumns() throws {
        let narrow = try Self.run(["demo"], columns: 80)
        let wide = try Self.run(["demo"], columns: 100)
        #expect(narrow.status == 0 && wide.status == 0, "\(narrow.error) \(wide.error)")
        #expect(Self.tooWide(narrow.output, 80).isEmpty, "\(Self.tooWide(narrow.output, 80))")
        #expect(Self.tooWide(wide.output, 100).isEmpty, "\(Self.tooWide(wide.output, 100))")
        // Narrower output has more lines, but the same words in the same order.
        #expect(narrow.output.split(separator: "\n").count > wide.output.split(separator: "\n").count)
        let (narrowWords, wideWords) = (Self.words(narrow.output), Self.words(wide.output))
        let firstDifference = zip(narrowWords, wideWords).enumerated().first { $0.element.0 != $0.element.1 }
        #expect(narrowWords.count == wideWords.count && firstDifference == nil,
                "word \(firstDifference?.offset ?? -1): \(firstDifference.map { "\($0.element.0) at 80, \($0.element.1) at 100" } ?? "counts \(narrowWords.count), \(wideWords.count)")")
    }

    @Test("the demo's listing shows the app's files, each name whole, and says what the simulated disk's bookkeeping is instead of listing it")
    func demoListingHidesTheDiskModel() throws {
        let result = try ProtectedStoreBinary.run(["demo"])
        #expect(result.status == 0, "\(result.error)")
        let listing = result.output.split(separator: "\n").filter { $0.hasPrefix("  ") && $0.contains(" bytes  ") }
        #expect(listing.contains { $0.hasPrefix("  app.sqlite ") }, "\(listing)")
        #expect(listing.contains { $0.hasPrefix("  app.sqlite.inbox-sequence ") }, "the whole name: \(listing)")
        #expect(!listing.contains { $0.contains(".disk-model") }, "\(listing)")
        let text = result.output.replacingOccurrences(of: "\n", with: " ")
        if text.contains(".disk-model") {
            #expect(text.contains("in .disk-model/, the simulated disk's bookkeeping: earlier versions of files that were replaced, kept so that a simulated power cut can bring them back"), "\(result.output)")
            #expect(text.contains("No plaintext in them either."))
        }
    }

    @Test("run wraps a quarantined record's line to COLUMNS; into a pipe without COLUMNS it is one line")
    func runWrapsToColumns() throws {
        let script = ProtectedStoreBinary.scenariosFolder.appendingPathComponent("inbox-quarantine.scenario").path
        let narrow = try Self.run(["run", "--fast-kdf", script], columns: 80)
        #expect(narrow.status == 0, "\(narrow.error)")
        #expect(narrow.output.contains("    quarantined "), "\(narrow.output)")
        #expect(Self.tooWide(narrow.output, 80).isEmpty, "\(Self.tooWide(narrow.output, 80))")
        let whole = try ProtectedStoreBinary.run(["run", "--fast-kdf", script])
        #expect(whole.output.split(separator: "\n").contains { $0.hasPrefix("    quarantined ") && $0.hasSuffix("which this app does not apply") }, "\(whole.output)")
    }

    @Test("a word longer than the line, a path, is never split: it has a line of its own, past the width")
    func longWordsStayWhole() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("output-width-" + String(repeating: "p", count: 90) + "-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let script = FileManager.default.temporaryDirectory.appendingPathComponent("output-width-\(getpid()).scenario")
        try "device setup --passcode 1234\ndevice setup --passcode 1234\n".write(to: script, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: script) }
        let narrow = try Self.run(["run", "--fast-kdf", "--state-dir", directory, script.path], columns: 80)
        #expect(narrow.output.contains("device-exists"), "\(narrow.output)")
        #expect(narrow.output.split(separator: "\n").contains { $0.trimmingCharacters(in: .whitespaces).hasPrefix(directory) }, "\(narrow.output)")
    }

    @Test("simulate wraps its power-cut summary and coverage lines to COLUMNS; into a pipe without COLUMNS each is one line")
    func simulateWrapsToColumns() throws {
        let narrow = try Self.run(["simulate", "--seeds", "3", "--steps", "100"], columns: 80)
        #expect(narrow.status == 0, "\(narrow.error)")
        #expect(narrow.output.contains(" power cuts: lost "), "\(narrow.output)")
        #expect(Self.tooWide(narrow.output, 80).isEmpty, "\(Self.tooWide(narrow.output, 80))")
        let whole = try ProtectedStoreBinary.run(["simulate", "--seeds", "3", "--steps", "100"])
        #expect(whole.output.split(separator: "\n").contains { $0.contains(" power cuts: lost ") && $0.hasSuffix("integrity checks, 0 lost") }, "\(whole.output)")
    }
}
