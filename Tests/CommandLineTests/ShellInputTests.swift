import Foundation
import TestSupport
import Testing

/// The shell reading a pipe or a file, and `run -`: errors on standard error, a stop at the first error
/// unless `--keep-going`, and exit statuses that say what went wrong.
@Suite("piped shell input and run -", .timeLimit(.minutes(3)))
struct ShellInputTests {
    @Test("piped: an unparsable line goes to stderr and stops the shell with exit 2; the lines after it do not run")
    func stopsAtUnparsableLine() throws {
        let directory = TemporaryDirectory()
        let result = try ProtectedStoreBinary.shell(
            ["device setup --passcode 1", "clock advance soon", "status"], state: directory.file("state"))
        #expect(result.status == 2)
        #expect(result.error == "line 2: error: bad duration 'soon' (use 500ms, 10s, 5m, 1h)\n")
        #expect(result.output.isEmpty, "status ran after the error: \(result.output)")
    }

    @Test("piped: control characters a line holds (an arrow key's escape sequence) are escaped in the error that repeats it")
    func controlCharactersAreEscapedInErrors() throws {
        let directory = TemporaryDirectory()
        let result = try ProtectedStoreBinary.run(
            ["shell", "--fast-kdf", "--keep-going", "--state-dir", directory.file("state")],
            input: "frob\u{1B}[A\nexpect store \u{7F}x\u{9B}2J\ndevice setup --passcode 1\napp launch\napp terminate\ninbox put k\u{1B}[2J v\n")
        #expect(result.error.contains("line 1: error: unknown command (not shown"), "\(result.error)")
        #expect(result.error.contains(#"'\u{7F}x\u{9B}2J' is not one of"#), "\(result.error)")
        // What a command prints repeats a key as it was typed.
        #expect(result.output.contains(#"for k\u{1B}[2J"#), "\(result.output)")
        for stream in [result.error, result.output] {
            #expect(
                !stream.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x7F || $0.value == 0x9B },
                "a control character reached the terminal: \(stream.debugDescription)")
        }
    }

    @Test("piped: a failed expect goes to stderr and stops the shell with exit 1")
    func stopsAtFailedExpectation() throws {
        let directory = TemporaryDirectory()
        let result = try ProtectedStoreBinary.shell(
            ["device setup --passcode 1", "expect device locked", "status"], state: directory.file("state"))
        #expect(result.status == 1)
        #expect(result.error == "line 2: FAILED: expected device locked, got device unlocked\n")
        #expect(result.output.isEmpty)
    }

    @Test("piped with --keep-going: every line runs, every error is reported, and the exit status is the worst")
    func keepGoing() throws {
        let directory = TemporaryDirectory()
        let result = try ProtectedStoreBinary.run(
            ["shell", "--fast-kdf", "--keep-going", "--state-dir", directory.file("state")],
            input: "device setup --passcode 1\nexpect device locked\nclock advance soon\nput a b\nget a\n")
        #expect(result.status == 2)
        #expect(
            result.error
                == "line 2: FAILED: expected device locked, got device unlocked\nline 3: error: bad duration 'soon' (use 500ms, 10s, 5m, 1h)\n")
        #expect(result.output.contains("no app is running"), "\(result.output)")
    }

    @Test("piped: a command the simulated device refuses is its output, not a shell error, and the shell goes on")
    func refusedCommandIsNotAShellError() throws {
        let directory = TemporaryDirectory()
        let result = try ProtectedStoreBinary.shell(
            ["device setup --passcode 1", "device lock", "device unlock --passcode 2", "expect error wrong-passcode", "expect device grace-period"],
            state: directory.file("state"))
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.isEmpty)
    }

    @Test("run - reads a script from standard input, named <stdin> in messages")
    func runReadsStandardInput() throws {
        let passing = try ProtectedStoreBinary.run(
            ["run", "--fast-kdf", "-"], input: "device setup --passcode 1\nexpect device unlocked\n")
        #expect(passing.status == 0, "\(passing.error)")
        #expect(passing.output == "<stdin>: 2 commands, 1 expectation held\n")
        let failing = try ProtectedStoreBinary.run(
            ["run", "--fast-kdf", "-"], input: "device setup --passcode 1\nexpect device locked\n")
        #expect(failing.status == 1)
        #expect(failing.error == "<stdin>:2: expected device locked, got device unlocked\n")
        let twice = try ProtectedStoreBinary.run(["run", "-", "-"], input: "")
        #expect(twice.status != 0)
        #expect(twice.error.contains("`-` (standard input) can be named only once"), "\(twice.error)")
    }
}
