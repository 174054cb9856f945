import SecureKeys
import Testing

@testable import ProtectedStoreHarness

/// Issue 26, finding 10: a passcode in the command language is kept in guarded memory, from the line the shell
/// read (``ScenarioParser/parse(utf8:passcodeMayBePrompted:)``) to the command the session runs.
@Suite("Passcodes in the command language stay in guarded memory")
struct ScenarioPasscodeTests {
    /// `line`'s UTF-8 bytes in guarded memory, as the shell reads a line.
    static func guarded(_ bytes: some Sequence<UInt8>) throws -> SecureBytes {
        var array = Array(bytes)
        defer { secureZero(&array) }
        return try array.withUnsafeBytes { try SecureBytes(copying: $0) }
    }

    @Test("a line read into guarded memory parses to the same command, or the same error, as the same line as text")
    func guardedLinesParseAsText() throws {
        var lines = ScenarioLanguageTests.samples.map(\.scriptLine)
        lines += [
            "", "   # a comment", "device unlock --passcode 1234\r", #"device unlock --passcode "a\u{1F600}b""#,
            "device unlock --passcode", #"device unlock --passcode "open"#, #"device setup --passcode "x\q""#,
            #"put k "\u{D800}""#, #"put k a"b"#, "device change-passcode --old a b --new c", "frobnicate",
        ]
        for line in lines {
            let asText = Result { try ScenarioParser.parse(line) }
            let asBytes = Result { try ScenarioParser.parse(utf8: Self.guarded(line.utf8)) }
            switch (asText, asBytes) {
            case (.success(let text), .success(let bytes)): #expect(text == bytes, "\(line.debugDescription)")
            case (.failure(let text as ScenarioParseError), .failure(let bytes as ScenarioParseError)):
                #expect(text == bytes, "\(line.debugDescription)")
            default: Issue.record("\(line.debugDescription): \(asText) as text, \(asBytes) as bytes")
            }
        }
        // Bytes that are not UTF-8 read as U+FFFD, as `String(decoding:as:)` repairs them.
        for bytes: [UInt8] in [
            Array("put k ".utf8) + [0xFF, 0x41], Array("put k \"".utf8) + [0xE2, 0x82, 0x22],
            Array("device unlock --passcode ".utf8) + [0xC3], [0xF0, 0x9F, 0x98],
        ] {
            let asText = Result { try ScenarioParser.parse(String(decoding: bytes, as: UTF8.self)) }
            let asBytes = Result { try ScenarioParser.parse(utf8: Self.guarded(bytes)) }
            #expect(String(describing: asText) == String(describing: asBytes), "\(bytes)")
        }
    }

    @Test("a parsed passcode is a guarded copy of its own: wiping the line leaves it whole")
    func passcodeOutlivesTheLine() throws {
        let line = try Self.guarded(#"device change-passcode --old "a b\tc" --new Zq7x-unique-passcode-9183"#.utf8)
        let command = try ScenarioParser.parse(utf8: line)
        line.wipe()
        guard case .deviceChangePasscode(let old?, let new?, false) = command else {
            Issue.record("\(String(describing: command))")
            return
        }
        let (oldExpected, newExpected, other) = (
            ScenarioPasscode("a b\tc"), ScenarioPasscode("Zq7x-unique-passcode-9183"),
            ScenarioPasscode("Zq7x-unique-passcode-9184"))
        #expect(old == oldExpected)
        #expect(new == newExpected)
        #expect(new != other)
        #expect(!new.bytes.isWiped)
    }

    @Test("a command's description never shows its passcode")
    func descriptionsAreRedacted() {
        let commands: [ScenarioCommand] = [
            .deviceSetup(passcode: "Zq7x-unique-passcode-9183", grace: .seconds(10), wipeAfter: nil),
            .deviceUnlock(passcode: "Zq7x-unique-passcode-9183"),
            .deviceChangePasscode(old: "Zq7x-unique-passcode-9183", new: "Zq7x-unique-passcode-9183"),
        ]
        for command in commands {
            for text in [String(describing: command), String(reflecting: command), "\(command)"] {
                #expect(!text.contains("Zq7x"), "\(text)")
                #expect(text.contains("25 bytes, redacted"), "\(text)")
            }
        }
    }

    @Test("a script read into guarded memory parses as the same text: byte order mark, CRLF, line numbers of errors")
    func guardedScriptsParseAsText() throws {
        let text = "\u{FEFF}device setup --passcode \"a b\" --grace 1s\r\n\r\n# comment\ndevice unlock --passcode 1234\nput k v"
        let fromText = try ScenarioScript(name: "s", text: text)
        let fromBytes = try ScenarioScript(name: "s", utf8: Self.guarded(text.utf8))
        #expect(fromBytes.lines.map(\.number) == [1, 4, 5])
        #expect(fromBytes.lines.map(\.number) == fromText.lines.map(\.number))
        #expect(fromBytes.lines.map(\.command) == fromText.lines.map(\.command))
        #expect(try ScenarioScript(name: "empty", utf8: Self.guarded([])).lines.isEmpty)
        #expect(throws: ScenarioScript.ParseFailure.self) {
            try ScenarioScript(name: "bad", utf8: Self.guarded("status\r\nput k \"open\r\n".utf8))
        }
        do {
            _ = try ScenarioScript(name: "bad", utf8: Self.guarded("status\n\ndevice unlock --passcode a b".utf8))
            Issue.record("a passcode with a space, unquoted, parsed")
        } catch let failure as ScenarioScript.ParseFailure {
            #expect(failure.line == 3)
            #expect(!failure.description.contains(" b"), "\(failure)")
        }
    }
}
