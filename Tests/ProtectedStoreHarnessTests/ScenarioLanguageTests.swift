import ProtectedData
import ProtectedStore
import Testing

@testable import ProtectedStoreHarness

@Suite("The command language: quoting, escapes and the round trip")
struct ScenarioLanguageTests {
    /// Values that need quoting, escapes, or care: every one must survive render → parse.
    static let awkwardValues = [
        "plain", "two words", "  leading", "trailing  ", "double  space", "", " ", "line\nbreak", "tab\there",
        "carriage\rreturn", "crlf\r\n", "nul\0byte", "quote \" inside", "\"", "back\\slash", "\\", "\\n written out",
        "# not a comment", "a#b", "--flag-like", "--bytes", "--bytes 5", "all", "none", "café 😀", "e\u{301}",
        "\u{301}starts with a combining mark", "no\u{A0}break", "line\u{2028}separator", "bell\u{7}", "del\u{7F}",
        "\u{FEFF}bom", "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}",
    ]

    /// A name for each kind of command. The switch has no `default`: a new case does not compile until it is
    /// named here and in ``allKinds``, and ``everyKindRoundTrips`` then fails until ``samples`` covers it.
    static func kind(of command: ScenarioCommand) -> String {
        switch command {
        case .deviceSetup: "device setup"
        case .deviceReboot: "device reboot"
        case .devicePowerCut: "device power-cut"
        case .deviceLock: "device lock"
        case .deviceUnlock: "device unlock"
        case .deviceChangePasscode: "device change-passcode"
        case .clockAdvance: "clock advance"
        case .appLaunch: "app launch"
        case .appTerminate: "app terminate"
        case .appCrash: "app crash"
        case .ui: "ui"
        case .put: "put"
        case .get: "get"
        case .delete: "delete"
        case .inboxPut: "inbox put"
        case .inboxDelete: "inbox delete"
        case .inboxQuarantine: "inbox quarantine"
        case .inboxRetry: "inbox retry"
        case .inboxDiscard: "inbox discard"
        case .damage: "damage"
        case .status: "status"
        case .faultNextIO: "fault next-io"
        case .expect(let expectation):
            switch expectation {
            case .protectedData: "expect protected-data"
            case .store: "expect store"
            case .coordinator: "expect coordinator"
            case .interaction: "expect interaction"
            case .queued: "expect queued"
            case .ran: "expect ran"
            case .value: "expect value"
            case .missing: "expect missing"
            case .error: "expect error"
            case .presentedError: "expect presented-error"
            case .device: "expect device"
            case .inbox: "expect inbox"
            case .quarantined: "expect quarantined"
            case .inboxDamaged: "expect inbox-damaged"
            case .noPlaintext: "expect no-plaintext"
            case .integrityOK: "expect integrity"
            }
        }
    }

    static let allKinds: Set<String> = [
        "device setup", "device reboot", "device power-cut", "device lock", "device unlock", "device change-passcode", "clock advance",
        "app launch", "app terminate", "app crash", "ui", "put", "get", "delete", "inbox put", "inbox delete",
        "inbox quarantine", "inbox retry", "inbox discard", "status", "expect protected-data", "expect store",
        "expect coordinator", "expect interaction", "expect queued", "expect ran", "expect value", "expect missing",
        "expect error", "expect presented-error", "expect device", "expect inbox", "expect quarantined",
        "expect no-plaintext", "expect integrity", "fault next-io", "damage", "expect inbox-damaged",
    ]

    /// Every kind of command, those that carry text once with each awkward value.
    static var samples: [ScenarioCommand] {
        var commands: [ScenarioCommand] = [
            .deviceSetup(passcode: "1234", grace: .seconds(10), wipeAfter: nil),
            .deviceSetup(passcode: "1234", grace: .milliseconds(1500), wipeAfter: 10, allowEmptyPasscode: true),
            .deviceReboot, .devicePowerCut(.drop, seed: 0), .devicePowerCut(.tornOp, seed: .max), .deviceLock, .clockAdvance(.milliseconds(1)), .clockAdvance(.seconds(3600)),
            .appLaunch(LaunchOptions(reason: .user, inBackground: false), protection: nil, attachDelay: .zero),
            .appLaunch(LaunchOptions(reason: .location, inBackground: true), protection: .completeUnlessOpen, attachDelay: .seconds(2)),
            .appTerminate, .appCrash, .inboxQuarantine, .inboxRetry, .inboxDiscard(nil), .status,
            .put(key: "k", value: ScenarioValue.filled(100)), .inboxPut(key: "k", value: ScenarioValue.filled(1000)),
            .inboxPut(key: "k", value: ScenarioValue.filled(70), kind: "note", otherProcess: true),
            .expect(.value(key: "k", value: ScenarioValue.filled(65))), .expect(.ran([])),
            .expect(.protectedData(available: true)), .expect(.protectedData(available: false)),
            .expect(.coordinator(assigned: true)), .expect(.coordinator(assigned: false)),
            .expect(.interaction(enabled: true)), .expect(.interaction(enabled: false)),
            .expect(.queued(3)), .expect(.inbox(0)), .expect(.quarantined(12)), .expect(.noPlaintext), .expect(.integrityOK),
            .expect(.inboxDamaged(117)), .damage(.inbox, .truncateTail(10)), .damage(.inbox, .setByte(offset: 5, value: 0x41)),
            .damage(.inbox, .flipByte(offset: 0)), .damage(.inbox, .setLength(recordAt: 111, value: 4_194_352)),
            .damage(.inbox, .setLength(recordAt: 0, value: .max)), .damage(.storeKey, .flipByte(offset: 40)),
            .damage(.inboxKey, .truncateTail(3)), .damage(.keybag, .setByte(offset: 7, value: 0)),
            .damage(.deviceState, .restore),
        ]
        commands += PowerCutMode.allCases.map { .devicePowerCut($0, seed: 7) }
        commands += [
            .faultNextIO(.init(.noSpace)), .faultNextIO(.init(.ioError, after: 3, persistent: true)),
            .faultNextIO(.init(.shortWrite, after: 1)), .faultNextIO(.init(.powerCut(.tornOp, seed: .max), after: 12)),
        ]
        commands += ScenarioParser.storeStates.map { .expect(.store($0)) }
        commands += ScenarioParser.deviceStates.map { .expect(.device($0)) }
        for value in awkwardValues {
            let passcode = try! ScenarioPasscode(value)
            commands += [
                .deviceSetup(passcode: passcode, grace: .seconds(10), wipeAfter: nil, allowEmptyPasscode: value.isEmpty),
                .deviceUnlock(passcode: passcode), .deviceChangePasscode(old: passcode, new: try! ScenarioPasscode(value + "2")),
                .deviceChangePasscode(old: passcode, new: passcode, allowEmptyPasscode: true), .ui(value), .put(key: value, value: value),
                .put(key: "k", value: value), .get(key: value), .delete(key: value),
                .inboxPut(key: value, value: value), .inboxPut(key: value, value: value, kind: value),
                .inboxPut(key: value, value: value, otherProcess: true), .inboxDelete(key: value),
                .inboxDiscard(value), .expect(.ran([value])), .expect(.ran([value, "b", value])),
                .expect(.value(key: value, value: value)), .expect(.missing(key: value)), .expect(.error(value)),
                .expect(.presentedError(value)),
            ]
        }
        return commands
    }

    @Test("every kind of command, with every awkward value, renders to one line that parses back to it")
    func everyKindRoundTrips() throws {
        let samples = Self.samples
        #expect(Set(samples.map(Self.kind(of:))) == Self.allKinds)
        for command in samples {
            let line = command.scriptLine
            #expect(!line.unicodeScalars.contains { $0 == "\n" || $0 == "\r" }, "\(line.debugDescription) is one line")
            #expect(try ScenarioParser.parse(line) == command, "\(line.debugDescription)")
        }
        // And as a whole script, with CRLF endings.
        let script = try ScenarioScript(name: "all", text: samples.map(\.scriptLine).joined(separator: "\r\n"))
        #expect(script.lines.map(\.command) == samples)
    }

    @Test("a word is written bare only when it reads back as itself")
    func renderingIsReadable() {
        #expect(quoted("Paris") == "Paris")
        #expect(quoted("48.85,2.35") == "48.85,2.35")
        #expect(quoted("café😀") == "café😀")
        #expect(quoted("") == #""""#)
        #expect(quoted("a b") == #""a b""#)
        #expect(quoted("a\nb\tc\rd\0e") == #""a\nb\tc\rd\0e""#)
        #expect(quoted(#"say "hi" \ #1"#) == #""say \"hi\" \\ #1""#)
        #expect(quoted("--key") == #""--key""#)
        #expect(quoted("bell\u{7} nbsp\u{A0} ls\u{2028}") == #""bell\u{7} nbsp\u{A0} ls\u{2028}""#)
    }

    @Test(
        "quoted words hold white space, # and escapes",
        arguments: [
            (#"put k "a\nb""#, "a\nb"), (#"put k "a\tb""#, "a\tb"), (#"put k "a\rb""#, "a\rb"), (#"put k "a\0b""#, "a\0b"),
            (#"put k "a\\b""#, "a\\b"), (#"put k "a\"b""#, "a\"b"), (#"put k "\u{1F600}""#, "😀"), (#"put k "\u{e9}""#, "é"),
            (#"put k "\u{0}\u{10FFFF}""#, "\0\u{10FFFF}"), (#"put k "a # b" # a comment"#, "a # b"),
            (#"put k "  two  spaces  ""#, "  two  spaces  "), (#"put k """#, ""), (#"put k a  b   c"#, "a b c"),
            (#"put k "a  b" c"#, "a  b c"), (#"put k a#b"#, "a"), ("put k \"a\u{301}\"", "a\u{301}"),
            ("put k \"raw\ttab\"", "raw\ttab"), ("put k v\r", "v"),
        ])
    func quotedValues(line: String, value: String) throws {
        #expect(try ScenarioParser.parse(line) == .put(key: "k", value: value))
    }

    @Test("an error on a line that holds a passcode repeats no word of it")
    func passcodeLineErrorsShowNoWord() throws {
        for line in [
            "device unlock --passcode correct horse", "device setup --passcode correct horse --grace 10s",
            "device change-passcode --old correct horse --new battery",
        ] {
            do {
                _ = try ScenarioParser.parse(line)
                Issue.record("\(line) parsed")
            } catch let error as ScenarioParseError {
                #expect(!error.message.contains("horse"), "\(error.message)")
                #expect(error.message.contains("not shown: the line holds a passcode"), "\(error.message)")
            }
        }
        #expect(throws: ScenarioParseError(message: "device unlock: unknown option --colour", column: nil)) {
            try ScenarioParser.parse("device unlock --passcode x --colour")
        }
    }

    @Test("a quoted word is always a value, never a flag or a keyword")
    func quotedWordIsAValue() throws {
        #expect(try ScenarioParser.parse(#"ui "--background""#) == .ui("--background"))
        #expect(try ScenarioParser.parse(#"inbox put k "--bytes" 3"#) == .inboxPut(key: "k", value: "--bytes 3"))
        #expect(try ScenarioParser.parse("inbox put k --bytes 3") == .inboxPut(key: "k", value: "012"))
        #expect(try ScenarioParser.parse(#"put k "--bytes" 3"#) == .put(key: "k", value: "--bytes 3"))
        #expect(try ScenarioParser.parse("put k --bytes 3") == .put(key: "k", value: "012"))
        #expect(try ScenarioParser.parse("inbox put --other-process k v") == .inboxPut(key: "k", value: "v", otherProcess: true))
        #expect(try ScenarioParser.parse(#"inbox put k "--other-process""#) == .inboxPut(key: "k", value: "--other-process"))
        #expect(try ScenarioParser.parse(#"inbox discard "all""#) == .inboxDiscard("all"))
        #expect(try ScenarioParser.parse("inbox discard all") == .inboxDiscard(nil))
        #expect(try ScenarioParser.parse(#"device unlock --passcode "--grace""#) == .deviceUnlock(passcode: "--grace"))
        #expect(throws: ScenarioParseError(message: "app launch: unexpected '--background'")) {
            try ScenarioParser.parse(#"app launch "--background""#)
        }
        #expect(throws: ScenarioParseError(message: "device unlock: --passcode needs a value (quote one that starts with --)")) {
            try ScenarioParser.parse("device unlock --passcode --grace")
        }
        #expect(throws: ScenarioParseError(message: "ui: missing an operation name")) { try ScenarioParser.parse("ui --x") }
    }

    @Test(
        "a tokenizer error names its column and what is wrong",
        arguments: [
            (#"put k a\b"#, 8, "a backslash outside double quotes"),
            (#"put k \"a""#, 7, "a backslash outside double quotes"),
            (#"put k "abc"#, 7, "unterminated quote"),
            (#"put k "abc\"#, 7, "unterminated quote"),
            (#"put k "ab\""#, 7, "unterminated quote"),
            (#"put k "ab\q""#, 10, #"unknown escape: a backslash in a quoted word takes one of \n \t \r \0 \\ \" \u{1F600}"#),
            (#"put k "\u{D800}""#, 8, #"bad \u escape: D800 is not a Unicode scalar"#),
            (#"put k "\u{110000}""#, 8, #"bad \u escape: 110000 is not a Unicode scalar"#),
            (#"put k "\u{}""#, 8, #"bad \u escape: write one to eight hex digits in braces"#),
            (#"put k "\u1F600""#, 8, #"bad \u escape"#),
            (#"put k "\u{123456789}""#, 8, #"bad \u escape"#),
            (#"put k "\u{12g}""#, 8, #"bad \u escape"#),
            (#"put k "\u{12"#, 8, #"bad \u escape"#),
            (#"put k "a"b"#, 10, "text right after a closing quote"),
            (#"put k "a""b""#, 10, "text right after a closing quote"),
            (#"put k a"b""#, 8, "a quote in the middle of a word"),
            ("put k \u{1F600} \"x", 9, "unterminated quote"),
        ])
    func tokenizerErrors(line: String, column: Int, message: String) {
        do {
            _ = try ScenarioParser.parse(line)
            Issue.record("\(line) parsed")
        } catch let error as ScenarioParseError {
            #expect(error.column == column, "\(line): \(error)")
            #expect(error.message.hasPrefix(message), "\(line): \(error)")
            #expect(error.description == "column \(column): \(error.message)")
        } catch {
            Issue.record("\(line): \(error) is not a ScenarioParseError")
        }
    }

    @Test("device setup refuses at parse time what the device refuses (DeviceRules): wipe-after over a million, a grace period over 100 years")
    func deviceSetupFollowsTheDeviceRules() throws {
        #expect(throws: ScenarioParseError.self) { try ScenarioParser.parse("device setup --passcode 1 --wipe-after 1000001") }
        #expect(throws: ScenarioParseError.self) { try ScenarioParser.parse("device setup --passcode 1 --grace 1000000h") }
        #expect(throws: ScenarioParseError.self) { try ScenarioParser.parse("device setup --passcode 1 --wipe-after 0") }
        #expect(try ScenarioParser.parse("device setup --passcode 1 --wipe-after 1000000") != nil)
    }

    @Test("a tokenizer error never repeats the line's text, which may hold a passcode")
    func errorsDoNotEchoTheLine() {
        for line in [#"device unlock --passcode "s3cret\q""#, #"device unlock --passcode "s3cret"#, #"device unlock --passcode s3cret\x"#] {
            #expect(throws: ScenarioParseError.self) { try ScenarioParser.parse(line) }
            do { _ = try ScenarioParser.parse(line) } catch { #expect(!"\(error)".contains("s3cret"), "\(error)") }
        }
    }

    @Test("a script with CRLF line endings and a byte order mark parses as its lines, errors named FILE:LINE:COLUMN")
    func crlfScripts() throws {
        let script = try ScenarioScript(
            name: "crlf", text: "\u{FEFF}device setup --passcode 1\r\nput k \"a b\"\r\n\r\n# note\r\nexpect value k \"a b\"\r\n")
        #expect(script.lines.map(\.number) == [1, 2, 5])
        #expect(script.lines.map(\.command) == [
            .deviceSetup(passcode: "1", grace: .seconds(10), wipeAfter: nil), .put(key: "k", value: "a b"),
            .expect(.value(key: "k", value: "a b")),
        ])
        // A carriage return inside a line is white space outside quotes and text inside them.
        #expect(try ScenarioScript(name: "cr", text: "put\rk \"a\rb\"\r\n").lines.map(\.command) == [.put(key: "k", value: "a\rb")])
        #expect(throws: ScenarioScript.ParseFailure.self) { try ScenarioScript(name: "x", text: "status\r\nput k \"open\r\n") }
        do {
            _ = try ScenarioScript(name: "x.scenario", text: "status\r\nput k \"open\r\n")
        } catch let failure as ScenarioScript.ParseFailure {
            #expect(failure.description == #"x.scenario:2:7: unterminated quote: the word that starts here has no closing ""#)
        }
        do {
            _ = try ScenarioScript(name: "y.scenario", text: "frobnicate\n")
        } catch let failure as ScenarioScript.ParseFailure {
            #expect(failure.column == nil)
            #expect(failure.description.hasPrefix("y.scenario:1: unknown command (not shown"))
        }
    }
}
