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
        terminal.send("device setup")
        try terminal.waitFor("new passcode: ")
        terminal.send("24682468")
        try terminal.waitFor("new passcode again: ")
        terminal.send("24682468")
        try terminal.waitFor(Self.prompt)
        terminal.send("device lock")
        try terminal.waitFor(Self.prompt)
        terminal.send("device unlock")
        try terminal.waitFor("passcode: ")
        terminal.send("24682468")
        try terminal.waitFor(Self.prompt)
        terminal.send("expect device unlocked")
        try terminal.waitFor("ok")
        terminal.send("quit")
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
        #expect(!terminal.transcript.contains("24682468"), "the passcode was echoed: \(terminal.transcript)")
        #expect(FileManager.default.fileExists(atPath: directory.file("state/device/state.json")))
    }

    @Test("Ctrl-D at the passcode prompt cancels device setup with a message, creates nothing, and the shell goes on")
    func endOfInputCancelsSetup() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        terminal.send("device setup")
        try terminal.waitFor("new passcode: ")
        terminal.sendEndOfFile()
        try terminal.waitFor("device setup cancelled: end of input (Ctrl-D) at the passcode prompt. No device was created.")
        try terminal.waitFor(Self.prompt)
        terminal.send("expect device none")
        try terminal.waitFor("ok")
        // Cancelled at the second prompt too.
        terminal.send("device setup")
        try terminal.waitFor("new passcode: ")
        terminal.send("1357")
        try terminal.waitFor("new passcode again: ")
        terminal.sendEndOfFile()
        try terminal.waitFor("No device was created.")
        try terminal.waitFor(Self.prompt)
        terminal.send("quit")
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("state/device/state.json")))
        #expect(!terminal.transcript.contains("1357"))
    }

    @Test("an empty passcode, typed or given as --passcode \"\", is refused; two that differ are refused; --allow-empty-passcode allows it")
    func emptyAndMismatchedPasscodesAreRefused() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        terminal.send("device setup")
        try terminal.waitFor("new passcode: ")
        terminal.send("")
        try terminal.waitFor("device setup: an empty passcode is refused (anyone could unlock the device)")
        try terminal.waitFor(Self.prompt)
        terminal.send("device setup --passcode \"\"")
        try terminal.waitFor("error: device setup: an empty passcode is refused")
        try terminal.waitFor(Self.prompt)
        terminal.send("device setup")
        try terminal.waitFor("new passcode: ")
        terminal.send("1111")
        try terminal.waitFor("new passcode again: ")
        terminal.send("2222")
        try terminal.waitFor("device setup: the two passcodes differ. No device was created.")
        try terminal.waitFor(Self.prompt)
        terminal.send("expect device none")
        try terminal.waitFor("ok")
        terminal.send("device setup --allow-empty-passcode")
        try terminal.waitFor("new passcode: ")
        terminal.send("")
        try terminal.waitFor("new passcode again: ")
        terminal.send("")
        try terminal.waitFor(Self.prompt)
        terminal.send("expect device unlocked")
        try terminal.waitFor("ok")
        terminal.send("quit")
        _ = try terminal.finish()
        #expect(FileManager.default.fileExists(atPath: directory.file("state/device/state.json")))
    }

    @Test("device change-passcode asks for the current passcode and the new one twice; the new one unlocks")
    func changePasscodePrompts() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        terminal.send("device setup --passcode 1234")
        try terminal.waitFor(Self.prompt)
        terminal.send("device change-passcode")
        try terminal.waitFor("current passcode: ")
        terminal.send("1234")
        try terminal.waitFor("new passcode: ")
        terminal.send("97531")
        try terminal.waitFor("new passcode again: ")
        terminal.send("97531")
        try terminal.waitFor(Self.prompt)
        terminal.send("device change-passcode")
        try terminal.waitFor("current passcode: ")
        terminal.sendEndOfFile()
        try terminal.waitFor("device change-passcode cancelled: end of input (Ctrl-D) at the passcode prompt. The passcode is unchanged.")
        try terminal.waitFor(Self.prompt)
        terminal.send("device lock")
        try terminal.waitFor(Self.prompt)
        terminal.send("device unlock --passcode 1234")
        try terminal.waitFor("error: wrong-passcode")
        try terminal.waitFor(Self.prompt)
        terminal.send("device unlock")
        try terminal.waitFor("passcode: ")
        terminal.send("97531")
        try terminal.waitFor(Self.prompt)
        terminal.send("expect device unlocked")
        try terminal.waitFor("ok")
        terminal.send("quit")
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
        #expect(!terminal.transcript.contains("97531"))
    }

    @Test("Ctrl-C (SIGINT) at a passcode prompt turns echo back on before the shell ends with 130, and creates nothing")
    func interruptAtPromptRestoresEcho() throws {
        let directory = TemporaryDirectory()
        let terminal = try shell(directory.file("state"))
        #expect(terminal.echoes)
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
