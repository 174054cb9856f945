import Foundation
import ProtectedStoreHarness
import TestSupport
import Testing

/// `protected-store shell` on a real pseudo-terminal, driven as someone typing: the arrow keys recall the
/// history (kept in the state directory, never a passcode line), Ctrl-C clears the line at the prompt and still
/// ends a running command, Ctrl-D ends the shell on a line of its own, and a command that needs a device says
/// so before asking for a passcode (issue 30, findings 6, 7 and 8).
@Suite("the shell at a terminal: line editing, history, Ctrl-C, Ctrl-D", .timeLimit(.minutes(3)))
struct ShellTerminalTests {
    static let prompt = "] > "
    /// The up arrow, as an xterm sends it.
    static let upArrow = "\u{1B}[A"
    /// A known terminal type, and no user's ~/.editrc changing the key bindings.
    static let environment = ["TERM": "xterm", "EDITRC": "/dev/null"]

    func shell(_ state: String, controllingTerminal: Bool = false) throws -> TerminalSession {
        let terminal = try TerminalSession(
            ["shell", "--fast-kdf", "--state-dir", state], environment: Self.environment,
            controllingTerminal: controllingTerminal)
        try terminal.waitFor(Self.prompt)
        return terminal
    }

    @Test("the up arrow recalls the previous line, and the history, kept in the state directory (0600), never holds a passcode line")
    func upArrowRecallsHistoryWithoutPasscodes() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        let terminal = try shell(state)
        try terminal.converse(
            [
                .type("expect device none", until: "ok", Self.prompt),
                // Recalled and run again: a second `ok`, where the escape sequence used to become the command.
                .press(Self.upArrow + "\n", until: "ok", Self.prompt),
                .type("device setup --passcode 24682468", until: Self.prompt),
                // The line recalled is the one before the passcode line: it fails now that there is a device.
                .press(Self.upArrow + "\n", until: "FAILED: expected device none, got device unlocked", Self.prompt),
                .type("quit"),
            ], timeout: .seconds(20))
        #expect(try terminal.finish() == 1, "\(terminal.transcript)")

        let file = state + "/" + ScenarioSession.shellHistoryFileName
        let attributes = try FileManager.default.attributesOfItem(atPath: file)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let history = try String(contentsOfFile: file, encoding: .utf8)
        #expect(history.contains(#"expect\040device\040none"#), "\(history)")  // libedit's encoding of spaces
        #expect(!history.contains("24682468") && !history.contains("setup"), "a passcode line was kept: \(history)")

        // The next session starts with the history of the last one.
        let again = try shell(state)
        try again.converse(
            [
                .press(Self.upArrow + "\n", until: "FAILED: expected device none", Self.prompt),
                .type("quit"),
            ], timeout: .seconds(20))
        #expect(try again.finish() == 1, "\(again.transcript)")
    }

    @Test("the history never holds a value: put, inbox put and expect value lines are left out, unlocked or locked")
    func historyHoldsNoValues() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        let terminal = try shell(state)
        try terminal.converse(
            [
                .type("device setup --passcode 1234", until: Self.prompt),
                .type("app launch", until: Self.prompt),
                .type("put note Hx4-put-value-8812", until: Self.prompt),
                .type("expect value note Hx4-put-value-8812", until: "ok", Self.prompt),
                .type("device lock", until: Self.prompt),
                .type("inbox put note Jy5-inbox-value-3391", until: Self.prompt),
                .type("put other Kz6-locked-value-5540", until: Self.prompt),
                .type("status", until: Self.prompt),
                .type("quit"),
            ], timeout: .seconds(30))
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")

        let history = try String(contentsOfFile: state + "/" + ScenarioSession.shellHistoryFileName, encoding: .utf8)
        for value in ["Hx4-put-value-8812", "Jy5-inbox-value-3391", "Kz6-locked-value-5540", "8812", "3391", "5540"] {
            #expect(!history.contains(value), "a value is in the history: \(history)")
        }
        #expect(history.contains(#"app\040launch"#) && history.contains("status"), "\(history)")
        #expect(!history.contains("put") && !history.contains("expect"), "a value line was kept: \(history)")
    }

    @Test("Ctrl-C at the prompt drops the line and shows a fresh prompt; Ctrl-C during a command still ends the shell")
    func controlCClearsTheLineAtThePrompt() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"), controllingTerminal: true)
        try terminal.converse(
            [
                // Typed, then dropped: the next line runs alone.
                .press("status", until: "status"),
                .press("\u{03}", until: "^C", Self.prompt),
                .type("expect device none", until: "ok", Self.prompt),
                .press("\u{03}", until: "^C", Self.prompt),
                // A command running (here, asking for a passcode): Ctrl-C ends the shell, as before, with 130.
                .type("device setup", until: "new passcode: "),
                .press("\u{03}"),
            ], timeout: .seconds(20))
        #expect(try terminal.finish() == 130, "\(terminal.transcript)")
        #expect(!terminal.transcript.contains("unknown command"), "\(terminal.transcript)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("state/device/state.json")))
    }

    @Test("Ctrl-D at the prompt ends the shell with status 0, after a line feed")
    func controlDEndsOnANewLine() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        try terminal.converse([.endOfFile()])
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
        let afterPrompt = terminal.transcript.components(separatedBy: Self.prompt).last ?? ""
        #expect(afterPrompt.hasSuffix("\r\n"), "the shell ended on the prompt's line: \(terminal.transcript.debugDescription)")
    }

    @Test("device unlock and device change-passcode without a device say no-device before asking for any passcode")
    func noDeviceIsSaidBeforeThePrompt() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        try terminal.converse(
            [
                .type("device unlock", until: "error: no-device", Self.prompt),
                .type("expect error no-device", until: "ok", Self.prompt),
                .type("device change-passcode", until: "error: no-device", Self.prompt),
                .type("device change-passcode --old 1234", until: "error: no-device", Self.prompt),
                .type("quit"),
            ], timeout: .seconds(20))
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
        #expect(!terminal.transcript.contains("passcode: "), "a passcode was asked for: \(terminal.transcript)")
    }

    @Test("through a device agent, device unlock says no-device before asking, and asks once another process set a device up")
    func noDeviceThroughTheAgent() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("s")
        let agent = try LiveProcess.agent(state: state)
        defer { agent.kill() }
        let terminal = try shell(state)
        try terminal.converse([.type("device unlock", until: "error: no-device", Self.prompt)], timeout: .seconds(20))
        #expect(!terminal.transcript.contains("passcode: "), "a passcode was asked for: \(terminal.transcript)")
        // Another client sets a device up and locks it: the shell asks the agent again before deciding.
        let other = try ProtectedStoreBinary.shell(["device setup --passcode 1234", "device lock"], state: state)
        #expect(other.status == 0, "\(other.error)")
        try terminal.converse(
            [
                .type("device unlock", until: "passcode: "),
                .type("1234", until: Self.prompt),
                .type("expect device unlocked", until: "ok", Self.prompt),
                .type("quit"),
            ], timeout: .seconds(20))
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
    }
}
