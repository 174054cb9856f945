import SecureKeys
import Testing

@testable import ProtectedStoreHarness

/// The table of commands (``ScenarioSyntax``) the parser reads lines against and `help` is written from.
@Suite("The table of commands: what the parser accepts, help, history, escaped errors")
struct ScenarioSyntaxTests {
    @Test("every command of the table parses, and every command parsed names its own entry")
    func tableAndParserAgree() throws {
        var covered: Set<ScenarioSyntax> = []
        for command in ScenarioLanguageTests.samples {
            let line = command.scriptLine
            let parsed = try #require(try ScenarioParser.parse(line))
            #expect(parsed.syntax == command.syntax, "\(line)")
            let keywords = command.syntax.keywords.joined(separator: " ")
            #expect(line == keywords || line.hasPrefix(keywords + " "), "\(line)")
            #expect(try ScenarioParser.syntax(utf8: SecureBytes(utf8: line)) == command.syntax, "\(line)")
            covered.insert(parsed.syntax)
        }
        #expect(covered == Set(ScenarioSyntax.allCases), "no sample for \(Set(ScenarioSyntax.allCases).subtracting(covered))")
    }

    @Test("every entry has keywords, a summary, and a usage that starts with its keywords; no two share their keywords")
    func entriesAreComplete() {
        var seen: Set<[String]> = []
        for syntax in ScenarioSyntax.allCases {
            #expect(!syntax.keywords.isEmpty && syntax.keywords.count <= 2)
            #expect(!syntax.summary.isEmpty)
            #expect(syntax.usage.hasPrefix(syntax.keywords.joined(separator: " ")))
            #expect(seen.insert(syntax.keywords).inserted, "\(syntax.keywords) twice")
            #expect(ScenarioSyntax.help().contains(syntax.keywords.joined(separator: " ")))
        }
    }

    @Test("a verb or an action the table does not have is refused, listing what the table has")
    func unknownWordsListTheTable() {
        #expect(throws: ScenarioParseError(message: "unknown device action (not shown); the choices are setup, reboot, power-cut, lock, unlock, change-passcode")) {
            try ScenarioParser.parse("device frob")
        }
        #expect(throws: ScenarioParseError(message: "device: missing an action (setup, reboot, power-cut, lock, unlock, change-passcode)")) {
            try ScenarioParser.parse("device")
        }
        #expect(throws: ScenarioParseError(message: "expect: missing what to expect (protected-data, store, coordinator, interaction, queued, ran, value, missing, error, presented-error, device, inbox, quarantined, inbox-damaged, no-plaintext, integrity)")) {
            try ScenarioParser.parse("expect")
        }
        #expect(throws: ScenarioParseError(message: "unknown command (not shown: it may be a passcode typed at the wrong prompt); the commands are device, clock, app, ui, put, get, delete, inbox, damage, status, fault, expect")) {
            try ScenarioParser.parse("frob")
        }
    }

    @Test("a rejected line never repeats a passcode: a line naming no command, an unknown action, and --passcode=P name the problem without the word")
    func rejectedLinesDoNotRepeatAPasscode() throws {
        let passcode = "Rk8-rejected-passcode-4410"
        for line in [passcode, "device \(passcode)", "device unlock --passcode=\(passcode)", "device setup --passcode=\(passcode)"] {
            do {
                _ = try ScenarioParser.parse(utf8: SecureBytes(utf8: line), passcodeMayBePrompted: true)
                Issue.record("accepted: \(line)")
            } catch let error as ScenarioParseError {
                #expect(!error.description.contains(passcode) && !error.description.contains("4410"), "\(error)")
            }
        }
        #expect(throws: ScenarioParseError(message: "device unlock: unknown option --passcode=… (the rest is not shown: the line holds a passcode; write --passcode VALUE, with a space)")) {
            try ScenarioParser.parse(utf8: SecureBytes(utf8: "device unlock --passcode=\(passcode)"), passcodeMayBePrompted: true)
        }
    }

    @Test("the lines that hold a value the app stores are put, inbox put and expect value; no other")
    func valueLines() throws {
        for line in ["put k v", "inbox put k v", "expect value k v", "put k --bytes 10"] {
            #expect(try ScenarioParser.syntax(utf8: SecureBytes(utf8: line))?.holdsValue == true, "\(line)")
        }
        for line in ["get k", "delete k", "inbox delete k", "expect missing k", "status", "app launch", "device lock"] {
            #expect(try ScenarioParser.syntax(utf8: SecureBytes(utf8: line))?.holdsValue == false, "\(line)")
        }
    }

    @Test("the commands that may hold a passcode are the ones named by a line that holds one; a line naming no command names none")
    func passcodeLines() throws {
        for line in ["device unlock --passcode 1234", "device setup --passcode 1", "device change-passcode --old 1 --new 2", "device unlock"] {
            #expect(try ScenarioParser.syntax(utf8: SecureBytes(utf8: line))?.holdsPasscode == true, "\(line)")
        }
        for line in ["1234", "", "# device unlock --passcode 1", "\"device\" unlock", "device \"unterminated"] {
            #expect(try ScenarioParser.syntax(utf8: SecureBytes(utf8: line)) == nil, "\(line)")
        }
        #expect(try ScenarioParser.syntax(utf8: SecureBytes(utf8: "device lock extra words"))?.holdsPasscode == false)
    }

    @Test("an error that repeats a word shows its control characters escaped, never raw")
    func errorsEscapeControlCharacters() {
        do {
            _ = try ScenarioParser.parse("clock advance \"\\u{7}\\u{7F}\\u{85}\\u{2028}\"")
            Issue.record("a bad duration was accepted")
        } catch let error as ScenarioParseError {
            #expect(error.message == #"bad duration '\u{7}\u{7F}\u{85}\u{2028}' (use 500ms, 10s, 5m, 1h)"#)
        } catch {
            Issue.record("\(error)")
        }
        #expect(ScenarioQuoting.escapingControlCharacters("plain café 😀") == "plain café 😀")
    }
}
