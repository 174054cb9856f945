import Foundation
import TestSupport
import Testing

/// `simulate`'s numeric options, its progress line at a terminal, and a minimized script that cannot be saved.
@Suite("simulate: options, progress and output", .timeLimit(.minutes(3)))
struct SimulateOptionsTests {
    @Test(
        "every numeric option is checked, with an error naming it, instead of trapping or running nothing",
        arguments: [
            (["--seeds", "0"], "--seeds must be at least 1, got 0"),
            (["--steps", "0"], "--steps must be at least 1, got 0"),
            (["--steps", "-3"], "--steps"),
            (["--start", "18446744073709551615", "--seeds", "2"], "runs past the last seed, 18446744073709551615"),
            (["--start", "18446744073709551616"], "--start"),
            (["--seeds", "9223372036854775807"], "more steps than can be counted"),
            (["--seeds", "many"], "--seeds"),
        ])
    func numericOptionsAreChecked(arguments: [String], message: String) throws {
        let result = try ProtectedStoreBinary.run(["simulate"] + arguments)
        #expect(result.status == 64, "\(result.error)")
        #expect(result.error.contains(message), "\(result.error)")
        #expect(!result.error.contains("Fatal error"), "\(result.error)")
    }

    @Test("not at a terminal, simulate writes nothing to standard error")
    func noProgressWhenNotATerminal() throws {
        let result = try ProtectedStoreBinary.run(["simulate", "--seeds", "2", "--steps", "5"])
        #expect(result.status == 0)
        #expect(result.error.isEmpty, "\(result.error)")
        #expect(result.output.hasPrefix("2 seeds, 10 steps, 0 violations"))
    }

    @Test("at a terminal, a progress line shows seeds done, steps/s, violations and time left; NO_COLOR and --no-progress are honoured")
    func progressAtATerminal() throws {
        let colored = try TerminalSession(["simulate", "--seeds", "3", "--steps", "10"], environment: ["NO_COLOR": "", "TERM": "xterm"])
        try colored.waitFor("3 seeds, 30 steps, 0 violations")
        #expect(try colored.finish() == 0)
        for part in ["seed 1 of 3 done", "seed 3 of 3 done · 30 steps · ", " steps/s · ", "\u{1B}[32m0 violations\u{1B}[0m", " left"] {
            #expect(colored.transcript.contains(part), "missing \(part): \(colored.transcript)")
        }

        let plain = try TerminalSession(["simulate", "--seeds", "2", "--steps", "10"], environment: ["NO_COLOR": "1"])
        try plain.waitFor("2 seeds, 20 steps")
        #expect(try plain.finish() == 0)
        #expect(plain.transcript.contains("seed 2 of 2 done"), "\(plain.transcript)")
        #expect(plain.transcript.contains("· 0 violations ·") && !plain.transcript.contains("\u{1B}[3"), "\(plain.transcript)")

        let quiet = try TerminalSession(["simulate", "--seeds", "2", "--steps", "10", "--no-progress"])
        try quiet.waitFor("2 seeds, 20 steps")
        #expect(try quiet.finish() == 0)
        #expect(!quiet.transcript.contains("of 2 done"), "\(quiet.transcript)")
    }

    @Test("a minimized script that cannot be written is printed anyway, the reason is said plainly, and the status still says violation")
    func unwritableOutput() throws {
        let directory = TemporaryDirectory()
        // A file where a folder should be: not writable even for root.
        try Data().write(to: URL(fileURLWithPath: directory.file("not-a-folder")))
        let result = try ProtectedStoreBinary.run(
            ["simulate", "--plant", "keep-coordinator-after-close", "--seeds", "40", "--output", directory.file("not-a-folder")])
        #expect(result.status == 1)
        #expect(result.output.contains("(not saved: see standard error)"), "\(result.output)")
        #expect(result.output.contains("# Minimized by `protected-store simulate` from seed"), "\(result.output)")
        #expect(result.output.contains("\nexpect "), "the script's failing expect line: \(result.output)")
        #expect(
            result.error.hasPrefix("simulate: could not write the minimized script to \(directory.file("not-a-folder"))/simulate-seed-")
                && result.error.contains(": Not a directory; it is printed above"),
            "\(result.error)")
        #expect(!result.error.contains("NSCocoaErrorDomain") && !result.error.contains("Error Domain"), "\(result.error)")
    }
}
