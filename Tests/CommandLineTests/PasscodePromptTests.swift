import Foundation
import TestSupport
import Testing

/// `device setup`, `device change-passcode` and `device unlock` typed at a terminal without their passcodes:
/// asked for with echo off, a new one twice, an empty one refused, Ctrl-D cancelling.
@Suite("passcodes asked for at a terminal", .timeLimit(.minutes(3)))
struct PasscodePromptTests {
    static let prompt = "] > "

    func shell(_ state: String) throws -> TerminalSession {
        let terminal = try TerminalSession(["shell", "--fast-kdf", "--state-dir", state])
        try terminal.waitFor(Self.prompt)
        return terminal
    }

    @Test("device setup asks twice with echo off, and the passcode never appears on the terminal")
    func setupAsksTwiceWithoutEcho() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        try terminal.converse([
            .type("device setup", until: "new passcode: "),
            .type("24682468", until: "new passcode again: "),
            .type("24682468", until: Self.prompt),
            .type("device lock", until: Self.prompt),
            .type("device unlock", until: "passcode: "),
            .type("24682468", until: Self.prompt),
            .type("expect device unlocked", until: "ok"),
            .type("quit"),
        ])
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
        #expect(!terminal.transcript.contains("24682468"), "the passcode was echoed: \(terminal.transcript)")
        #expect(FileManager.default.fileExists(atPath: directory.file("state/device/state.json")))
    }

    @Test("Ctrl-D at the passcode prompt cancels device setup with a message, creates nothing, and the shell goes on")
    func endOfInputCancelsSetup() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        try terminal.converse([
            .type("device setup", until: "new passcode: "),
            .endOfFile(
                until: "device setup cancelled: end of input (Ctrl-D) at the passcode prompt. No device was created.",
                Self.prompt),
            .type("expect device none", until: "ok"),
            // Cancelled at the second prompt too.
            .type("device setup", until: "new passcode: "),
            .type("1357", until: "new passcode again: "),
            .endOfFile(until: "No device was created.", Self.prompt),
            .type("quit"),
        ])
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("state/device/state.json")))
        #expect(!terminal.transcript.contains("1357"))
    }

    @Test("an empty passcode, typed or given as --passcode \"\", is refused; two that differ are refused; --allow-empty-passcode allows it")
    func emptyAndMismatchedPasscodesAreRefused() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        try terminal.converse([
            .type("device setup", until: "new passcode: "),
            .type("", until: "device setup: an empty passcode is refused (anyone could unlock the device)", Self.prompt),
            .type("device setup --passcode \"\"", until: "error: device setup: an empty passcode is refused", Self.prompt),
            .type("device setup", until: "new passcode: "),
            .type("1111", until: "new passcode again: "),
            .type("2222", until: "device setup: the two passcodes differ. No device was created.", Self.prompt),
            .type("expect device none", until: "ok"),
            .type("device setup --allow-empty-passcode", until: "new passcode: "),
            .type("", until: "new passcode again: "),
            .type("", until: Self.prompt),
            .type("expect device unlocked", until: "ok"),
            .type("quit"),
        ])
        // 2: the `--passcode ""` line was refused as it was parsed, and the shell exits with its worst error.
        #expect(try terminal.finish() == 2, "\(terminal.transcript)")
        #expect(FileManager.default.fileExists(atPath: directory.file("state/device/state.json")))
    }

    @Test("device change-passcode asks for the current passcode and the new one twice; the new one unlocks")
    func changePasscodePrompts() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        try terminal.converse([
            .type("device setup --passcode 1234", until: Self.prompt),
            .type("device change-passcode", until: "current passcode: "),
            .type("1234", until: "new passcode: "),
            .type("97531", until: "new passcode again: "),
            .type("97531", until: Self.prompt),
            .type("device change-passcode", until: "current passcode: "),
            .endOfFile(
                until: "device change-passcode cancelled: end of input (Ctrl-D) at the passcode prompt. The passcode is unchanged.",
                Self.prompt),
            .type("device lock", until: Self.prompt),
            .type("device unlock --passcode 1234", until: "error: wrong-passcode", Self.prompt),
            .type("device unlock", until: "passcode: "),
            .type("97531", until: Self.prompt),
            .type("expect device unlocked", until: "ok"),
            .type("quit"),
        ])
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
        #expect(!terminal.transcript.contains("97531"))
    }

    @Test("Ctrl-C (SIGINT) at a passcode prompt turns echo back on before the shell ends with 130, and creates nothing")
    func interruptAtPromptRestoresEcho() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        // At the shell's prompt echo is off as well: libedit draws what is typed itself.
        terminal.send("device setup")
        try terminal.waitFor("new passcode: ")
        #expect(!terminal.echoes, "echo is off while the passcode is typed")
        kill(terminal.process.processIdentifier, SIGINT)
        #expect(try terminal.finish() == 130, "\(terminal.transcript)")
        #expect(terminal.echoes, "the terminal was left without echo")
        #expect(!FileManager.default.fileExists(atPath: directory.file("state/device/state.json")))
    }

    @Test("without a terminal, a passcode left out is an error that says it is asked for only at a terminal")
    func pipedInputNeedsPasscodeOption() throws {
        let directory = TemporaryDirectory()
        for line in ["device setup", "device change-passcode --old 1", "device unlock"] {
            let result = try ProtectedStoreBinary.shell([line], state: directory.file("state"))
            #expect(result.status == 2)
            #expect(
                result.error.hasPrefix("line 1: error: \(line.split(separator: " ").prefix(2).joined(separator: " ")): missing --")
                    && result.error.contains("(the passcode is asked for only when the shell reads a terminal)"),
                "\(result.error)")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.file("state/device/state.json")))
    }

    @Test("a script's empty passcode is refused before anything runs, unless --allow-empty-passcode")
    func scriptEmptyPasscode() throws {
        let refused = try ProtectedStoreBinary.run(["run", "--fast-kdf", "-"], input: "device setup --passcode \"\"\n")
        #expect(refused.status == 2)
        #expect(refused.error.hasPrefix("<stdin>:1: device setup: an empty passcode is refused"), "\(refused.error)")
        let newEmpty = try ProtectedStoreBinary.run(
            ["run", "--fast-kdf", "-"], input: "device setup --passcode 1\ndevice change-passcode --old 1 --new \"\"\n")
        #expect(newEmpty.status == 2)
        #expect(newEmpty.error.hasPrefix("<stdin>:2: device change-passcode: an empty passcode is refused"), "\(newEmpty.error)")
        let allowed = try ProtectedStoreBinary.run(
            ["run", "--fast-kdf", "-"],
            input: "device setup --passcode \"\" --allow-empty-passcode\ndevice lock\nclock advance 1m\ndevice unlock --passcode \"\"\nexpect device unlocked\n")
        #expect(allowed.status == 0, "\(allowed.error)")
    }
}
