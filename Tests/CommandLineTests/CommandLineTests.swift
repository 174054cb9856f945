import TestSupport
import Foundation
import Testing

/// Runs the built `protected-store` binary as a child process, like swift-argument-parser's
/// `AssertExecuteCommand`.
struct ProtectedStoreBinary {
    static let url: URL = {
        // The test bundle and the executable are built into the same folder.
        let folder = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        return folder.appendingPathComponent("protected-store")
    }()

    static let scenariosFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Scenarios")

    struct Result {
        let status: Int32
        let output: String
        let error: String
    }

    /// Runs the binary with `arguments`; with `executable`, runs that program (found on PATH) with
    /// `argumentsBefore`, which must end with the binary's path, then `arguments` (`prlimit … -- BINARY …`).
    static func run(
        _ arguments: [String], input: String? = nil, in directory: String? = nil, executable: String? = nil,
        argumentsBefore: [String] = []
    ) throws -> Result {
        let process = Process()
        if let executable {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [executable] + argumentsBefore + arguments
        } else {
            process.executableURL = url
            process.arguments = arguments
        }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        // The output's width is the test's to set (`env COLUMNS=80 …`), never the terminal's the tests run in.
        process.environment = ProcessInfo.processInfo.environment.filter { $0.key != "COLUMNS" }
        let stdout = Pipe()
        let stderr = Pipe()
        let stdin = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = stdin
        try process.run()
        // Feed stdin and drain stderr on threads of their own (the global queue's few workers can all be
        // blocked by other tests): a child that writes more than a pipe holds while
        // it is still being fed (or to stderr while stdout is read) would otherwise deadlock with the test.
        // A child that exits before reading all its input must not end the test with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        let done = DispatchSemaphore(value: 0)
        Thread {
            if let input { try? stdin.fileHandleForWriting.write(contentsOf: Data(input.utf8)) }
            try? stdin.fileHandleForWriting.close()
            done.signal()
        }.start()
        let errorOutput = ErrorOutput()
        Thread {
            errorOutput.data = stderr.fileHandleForReading.readDataToEndOfFile()
            done.signal()
        }.start()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        done.wait()
        done.wait()
        let error = errorOutput.data
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, output: String(decoding: output, as: UTF8.self),
            error: String(decoding: error, as: UTF8.self))
    }

    /// What the stderr reader read; @unchecked Sendable: written on its thread, read after it signalled.
    final class ErrorOutput: @unchecked Sendable {
        var data = Data()
    }

    /// Runs `protected-store shell` on `state` fed `lines`; with `prefix`, under that program (one that sets a
    /// limit or a mount, then execs what follows it: `prlimit … --`).
    static func shell(_ lines: [String], state: String, under prefix: [String] = []) throws -> Result {
        let arguments = ["shell", "--fast-kdf", "--state-dir", state]
        let input = lines.joined(separator: "\n") + "\n"
        guard let program = prefix.first else { return try run(arguments, input: input) }
        return try run(arguments, input: input, executable: program, argumentsBefore: Array(prefix.dropFirst()) + [url.path])
    }

    /// Restarts on `state`, unlocks with `passcode`, launches, and expects the store ready, then `extra`, then
    /// each of `values` (the writes that were acknowledged).
    static func expectStoreHolds(
        _ values: [String: String], state: String, passcode: String = "1", also extra: [String] = []
    ) throws {
        let check = try shell(
            ["device unlock --passcode \(passcode)", "app launch", "expect store ready"] + extra
                + values.keys.sorted().map { "expect value \($0) \(values[$0]!)" },
            state: state)
        #expect(
            check.status == 0,
            "\(check.output.split(separator: "\n").filter { $0.contains("FAILED") }.prefix(5)) \(check.error.suffix(1500))")
        #expect(!check.output.contains("FAILED"))
    }

    static var scenarios: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: scenariosFolder.path)) ?? [])
            .filter { $0.hasSuffix(".scenario") }.sorted()
    }
}

@Suite("protected-store command line", .timeLimit(.minutes(3)))
struct CommandLineTests {
    @Test("every scenario script under Tests/Scenarios holds", arguments: ProtectedStoreBinary.scenarios)
    func scenarioHolds(name: String) throws {
        let path = ProtectedStoreBinary.scenariosFolder.appendingPathComponent(name).path
        let result = try ProtectedStoreBinary.run(["run", "--fast-kdf", path])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.hasSuffix(" held\n"), "\(result.output)")
    }

    @Test(
        "power-cut.scenario fails with each planted missing fsync: the script can tell",
        arguments: ["missing-inbox-fsync", "missing-directory-fsync"])
    func powerCutScenarioCatchesMissingFsync(plant: String) throws {
        let path = ProtectedStoreBinary.scenariosFolder.appendingPathComponent("power-cut.scenario").path
        let result = try ProtectedStoreBinary.run(["run", "--fast-kdf", "--plant", plant, path])
        #expect(result.status == 1, "\(result.output)")
        #expect(result.error.contains("expected") || result.output.contains("expected"))
    }

    @Test("there are scenario scripts to run")
    func scenariosExist() {
        #expect(ProtectedStoreBinary.scenarios.count >= 10)
    }

    func script(_ text: String, in directory: TemporaryDirectory) throws -> String {
        let path = directory.file("script.scenario")
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    @Test("a failing expect exits 1 naming FILE:LINE, what was expected and what was there")
    func failingExpectation() throws {
        let directory = TemporaryDirectory()
        let path = try script("device setup --passcode 1\ndevice reboot\napp launch --background\nexpect store ready\nexpect store waiting\n", in: directory)
        let result = try ProtectedStoreBinary.run(["run", "--fast-kdf", path])
        #expect(result.status == 1)
        #expect(result.error == "\(path):4: expected store ready, got store waiting\n")
    }

    @Test(
        "an unparsable line exits 2 naming the line (and the column of a bad quote or escape), before anything runs",
        arguments: [
            ("device setup --passcode 1\nfrobnicate now\n", "2", "unknown command (not shown: it may be a passcode"),
            ("clock advance 10x\n", "1", "bad duration '10x' (use 500ms, 10s, 5m, 1h)"),
            ("# comment\n\ndevice unlock\n", "3", "device unlock: missing --passcode (the passcode is asked for only when"),
            ("app launch --reason boredom\n", "1", "unknown launch reason 'boredom'"),
            ("app launch --attach-delay\n", "1", "app launch: --attach-delay needs a duration"),
            ("expect queued many\n", "1", "expect queued: 'many' is not a number"),
            ("device setup --passcode 1 --colour red\n", "1", "device setup: unknown option --colour"),
            ("put key \"unterminated\n", "1:9", "unterminated quote"),
            ("status\r\nput k \"a\\qb\"\r\n", "2:9", "unknown escape"),
            ("put k C:\\path\n", "1:9", "a backslash outside double quotes"),
        ])
    func unparsableLine(text: String, line: String, message: String) throws {
        let directory = TemporaryDirectory()
        let path = try script(text, in: directory)
        let result = try ProtectedStoreBinary.run(["run", path])
        #expect(result.status == 2)
        #expect(result.error.hasPrefix("\(path):\(line): \(message)"), "\(result.error)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("device")))
    }

    @Test("the shell reads a pipe without a prompt, and a second run on the same state directory is a reboot")
    func shellPersistsAcrossRuns() throws {
        let directory = TemporaryDirectory()
        let first = try ProtectedStoreBinary.run(
            ["shell", "--fast-kdf", "--state-dir", directory.file("state")],
            input: "device setup --passcode 4321\napp launch\nput city Lyon\nget city\nexpect store ready\n")
        #expect(first.status == 0, "\(first.output)")
        #expect(first.output == "city = Lyon\n")
        let second = try ProtectedStoreBinary.run(
            ["shell", "--fast-kdf", "--state-dir", directory.file("state")],
            input: """
                expect device before-first-unlock
                app launch --background --reason location
                expect store waiting
                get city
                device unlock --passcode 4321
                expect store ready
                status

                """)
        #expect(second.status == 0, "\(second.output)")
        #expect(second.output.hasPrefix("city = Lyon\n"))
        #expect(second.output.contains("store           ready (complete)"))
        #expect(!first.output.contains("4321") && !second.output.contains("4321"), "the passcode is never echoed")
    }


    @Test("simulate refuses a seed range past the last seed with a clear error, instead of trapping on overflow")
    func simulateSeedRangeOverflow() throws {
        let result = try ProtectedStoreBinary.run(["simulate", "--start", "18446744073709551615", "--seeds", "2"])
        #expect(result.status != 0)
        #expect(result.error.contains("runs past the last seed"), "\(result.error)")
        let last = try ProtectedStoreBinary.run(["simulate", "--start", "18446744073709551615", "--seeds", "1", "--steps", "3"])
        #expect(last.status == 0, "\(last.error)")
        #expect(last.output.contains("1 seeds, 3 steps, 0 violations"))
    }
}
