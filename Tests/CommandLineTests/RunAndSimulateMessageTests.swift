import Foundation
import TestSupport
import Testing

/// Messages that said too little (issue 30, item 10): which of missing, a folder or not UTF-8 a script is; the
/// range a numeric option takes; the planted bugs `simulate` knows; counts in the singular; what `make` offers.
@Suite("run, simulate and make say exactly what is wrong and what there is", .timeLimit(.minutes(3)))
struct RunAndSimulateMessageTests {
    @Test("run on a missing file, a folder and a file that is not UTF-8 says which, with exit status 2")
    func runSaysWhichScriptProblem() throws {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("folder"), withIntermediateDirectories: false)
        try Data("device setup --passcode 1\nput k \"caf\u{E9}\"\n".utf8 + [0x23, 0x20, 0xC3, 0x28, 0x0A]).write(to: URL(fileURLWithPath: directory.file("latin1.scenario")))
        for (name, message) in [
            ("missing.scenario", "cannot read the script: there is no such file"),
            ("folder", "cannot read the script: it is a directory, not a script file"),
            ("latin1.scenario", "cannot read the script: it is not UTF-8 text (line 3, column 3, byte 42 of the file)"),
        ] {
            let result = try ProtectedStoreBinary.run(["run", directory.file(name)])
            #expect(result.status == 2, "\(name): \(result.error)")
            #expect(result.error == "\(directory.file(name)):0: \(message)" + (name == "latin1.scenario" ? "; save it as UTF-8\n" : "\n"), "\(result.error)")
        }
    }

    @Test("a count of one is singular: 1 command, 1 expectation held")
    func singularCounts() throws {
        let result = try ProtectedStoreBinary.run(["run", "-"], input: "expect device none\n")
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output == "<stdin>: 1 command, 1 expectation held\n", "\(result.output)")
    }

    @Test(
        "a negative number reaches the option's own check; one past the type's range names the range",
        arguments: [
            (["--seeds", "-5"], "--seeds must be at least 1, got -5"),
            (["--steps", "-1"], "--steps must be at least 1, got -1"),
            (["--seeds", "99999999999999999999"], "'--seeds <seeds>': out of range: it takes a whole number from 1 to 9223372036854775807"),
            (["--steps", "-99999999999999999999"], "'--steps <steps>': out of range: it takes a whole number from 1 to 9223372036854775807"),
            (["--start", "-1"], "'--start <start>': out of range: it takes a whole number from 0 to 18446744073709551615"),
            (["--seeds", "many"], "'--seeds <seeds>': not a whole number: it takes a whole number from 1 to 9223372036854775807"),
        ])
    func numbersOutOfRangeAreNamed(arguments: [String], message: String) throws {
        let result = try ProtectedStoreBinary.run(["simulate"] + arguments)
        #expect(result.status == 64, "\(result.error)")
        #expect(result.error.contains(message), "\(result.error)")
        #expect(!result.error.contains("Missing value"), "\(result.error)")
    }

    @Test("simulate --help shows --plant with every value it takes; a wrong value lists them")
    func plantIsListed() throws {
        let help = try ProtectedStoreBinary.run(["simulate", "--help"])
        let flat = help.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(flat.contains("--plant <plant> Plant a bug in the app"), "\(help.output)")
        for value in ["keep-coordinator-after-close", "missing-inbox-fsync", "missing-directory-fsync", "wipe-not-rolled-forward", "merge-truncates-unread"] {
            #expect(flat.contains(value), "\(value): \(help.output)")
        }
        let wrong = try ProtectedStoreBinary.run(["simulate", "--plant", "nope"])
        #expect(wrong.status == 64)
        #expect(wrong.error.contains("Please provide one of 'keep-coordinator-after-close'"), "\(wrong.error)")
    }

    @Test("make with no target lists every target with the first line of its ## comment")
    func makeListsItsTargets() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let makefile = try String(contentsOf: root.appendingPathComponent("Makefile"), encoding: .utf8)
        let phony = try #require(makefile.split(separator: "\n").first { $0.hasPrefix(".PHONY:") })
        let targets = phony.dropFirst(".PHONY:".count).split(separator: " ").map(String.init)
        let result = try ProtectedStoreBinary.run([], executable: "make", argumentsBefore: ["--no-print-directory", "-C", root.path])
        #expect(result.status == 0, "\(result.error)")
        let lines = result.output.split(separator: "\n").map(String.init)
        #expect(lines.count == targets.count, "\(result.output)")
        for target in targets {
            let line = lines.first { $0.hasPrefix("  make \(target) ") }
            #expect(line.map { $0.dropFirst("  make ".count + target.count).trimmingCharacters(in: .whitespaces).count > 10 } == true,
                    "no description for \(target): \(result.output)")
        }
        #expect(lines.contains("  make demo              The main job: the narrated walkthrough."), "\(result.output)")
    }
}
