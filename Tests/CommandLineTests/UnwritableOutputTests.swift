import Foundation
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Every command that prints, run with its standard output and then its standard error closed, on a full disk
/// (`/dev/full`) and into a pipe nobody reads: no signal ends it (the write that fails is dropped, never a trap
/// or SIGPIPE), its exit status is the one it has when its output is written, and its work is done — the export
/// file is there, the rest of a `--keep-going` script ran, the temporary state directories are gone.
@Suite("output that cannot be written never ends a command", .serialized, .timeLimit(.minutes(10)))
struct UnwritableOutputTests {
    /// What happens to the stream under test.
    enum Condition: String, CaseIterable, Sendable {
        /// The descriptor is not open at all.
        case closed
        /// `/dev/full`: every write fails with ENOSPC.
        case full
        /// A pipe whose read end is closed before the command starts: every write fails with EPIPE.
        case brokenPipe = "broken pipe"
    }

    /// How a command ended: its exit status, or the signal that ended it.
    struct Ending: Equatable, CustomStringConvertible {
        let status: Int32?
        let signal: Int32?
        var description: String { signal.map { "killed by signal \($0)" } ?? "exit \(status ?? -1)" }
    }

    /// One command, with what it needs made in a fresh folder before each run and a check that its work was done.
    struct Case: CustomStringConvertible, Sendable {
        let name: String
        /// The arguments, given the run's folder.
        let arguments: @Sendable (String) -> [String]
        /// Standard input.
        var input = ""
        /// The status it ends with when its output is written.
        let status: Int32
        /// Whether a broken pipe on standard output ends it with 141 after its clean-up (the demo: its output is its
        /// work).
        var endsOnBrokenPipe = false
        /// Copies a template state directory (a device, passcode 1234, and a store with a recovery key) to
        /// `FOLDER/state` before it runs.
        var needsStore = false
        /// Checks, after the run, that the work was done; returns what is missing, or `nil`.
        var workDone: @Sendable (String) throws -> String? = { _ in nil }
        var description: String { name }
    }

    static let failingScript = """
        device setup --passcode 1
        app launch
        expect store ready
        put first one
        status
        expect device locked
        """

    /// Whether `state` holds `key` = `value`, read by a shell of its own.
    static func holds(_ state: String, _ key: String, _ value: String) throws -> String? {
        let check = try ProtectedStoreBinary.shell(
            ["device unlock --passcode 1", "app launch", "expect store ready", "expect value \(key) \(value)"], state: state)
        return check.status == 0 ? nil : "\(key) is not \(value) in \(state): \(check.error)"
    }

    static func exists(_ path: String) -> String? { FileManager.default.fileExists(atPath: path) ? nil : "\(path) was not written" }

    static let cases: [Case] = [
        Case(name: "demo", arguments: { _ in ["demo"] }, status: 0, endsOnBrokenPipe: true),
        Case(
            name: "run with a failing expectation", arguments: { ["run", "--fast-kdf", "--state-dir", $0 + "/s", $0 + "/failing.scenario"] },
            status: 1, workDone: { try holds($0 + "/s", "first", "one") }),
        Case(
            name: "shell --keep-going with an unknown line and a failing expectation",
            arguments: { ["shell", "--fast-kdf", "--keep-going", "--state-dir", $0 + "/s"] },
            input: "device setup --passcode 1\napp launch\nexpect store ready\nfrobnicate\nexpect device locked\nstatus\nget none\nput last done\n",
            status: 2, workDone: { try holds($0 + "/s", "last", "done") }),
        Case(name: "simulate", arguments: { _ in ["simulate", "--seeds", "1", "--steps", "40", "--no-progress"] }, status: 0),
        Case(
            name: "store export --plaintext", arguments: { ["store", "export", "--state-dir", $0 + "/state", "--to", $0 + "/out.sqlite", "--plaintext"] },
            input: "1234\n", status: 0, needsStore: true, workDone: { exists($0 + "/out.sqlite") }),
        Case(
            name: "store backup", arguments: { ["store", "backup", "--state-dir", $0 + "/state", "--to", $0 + "/app.backup"] },
            input: "1234\n", status: 0, needsStore: true, workDone: { exists($0 + "/app.backup") }),
        Case(name: "store recovery-key show", arguments: { ["store", "recovery-key", "show", "--state-dir", $0 + "/state"] }, status: 0, needsStore: true),
        // Refused with an error on standard error (this build's SQLCipher 3 cannot write format 2): exit 1.
        Case(name: "store migrate", arguments: { ["store", "migrate", "--state-dir", $0 + "/state"] }, input: "1234\n", status: 1, needsStore: true),
        Case(name: "--help", arguments: { _ in ["--help"] }, status: 0),
        Case(name: "--version", arguments: { _ in ["--version"] }, status: 0),
        Case(name: "a usage error", arguments: { _ in ["simulate", "--seeds", "0"] }, status: 64),
    ]

    /// Makes the template state directory in `folder`: a device (passcode 1234) and a store holding a value, with
    /// a recovery key.
    static func makeTemplate(_ folder: String) throws {
        let made = try ProtectedStoreBinary.shell(["device setup --passcode 1234", "app launch", "expect store ready", "put alpha one"], state: folder)
        try #require(made.status == 0, "the template store could not be made: \(made.error)")
        let key = try ProtectedStoreBinary.run(["store", "recovery-key", "create", "--fast-kdf", "--state-dir", folder])
        try #require(key.status == 0, "the template recovery key could not be made: \(key.error)")
    }

    /// Runs the binary with `arguments` and `input` in `folder` (TMPDIR `folder/tmp`), with `stream` (1 or 2) in
    /// `condition` — or, when `condition` is `nil`, written to a file — and the other stream to a file.
    static func launch(_ arguments: [String], input: String, folder: String, stream: Int32, condition: Condition?) throws -> Ending {
        let inputPath = folder + "/stdin"
        try input.write(toFile: inputPath, atomically: true, encoding: .utf8)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, inputPath, O_RDONLY, 0)
        for descriptor: Int32 in [1, 2] where descriptor != stream || condition == nil {
            posix_spawn_file_actions_addopen(&actions, descriptor, folder + "/out\(descriptor)", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        }
        var pipeEnds: [Int32] = [-1, -1]
        switch condition {
        case nil: break
        case .closed: posix_spawn_file_actions_addclose(&actions, stream)
        case .full: posix_spawn_file_actions_addopen(&actions, stream, "/dev/full", O_WRONLY, 0)
        case .brokenPipe:
            guard pipe(&pipeEnds) == 0 else { throw POSIXError(.EMFILE) }
            close(pipeEnds[0])  // nobody will ever read
            posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], stream)
        }
        defer { if pipeEnds[1] >= 0 { close(pipeEnds[1]) } }
        signal(SIGPIPE, SIG_IGN)
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = folder + "/tmp/"
        environment["COLUMNS"] = nil
        let argv = ([ProtectedStoreBinary.url.path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, ProtectedStoreBinary.url.path, &actions, nil, argv, envp)
        guard spawned == 0 else { throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .EINVAL) }
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        let signalled = status & 0x7F
        if signalled != 0 { return Ending(status: nil, signal: signalled) }
        return Ending(status: (status >> 8) & 0xFF, signal: nil)
    }

    /// A fresh folder for one run of `command`, with what it needs (a copy of `template`).
    static func prepare(_ command: Case, template: String) throws -> TemporaryDirectory {
        let directory = TemporaryDirectory()
        try FileManager.default.createDirectory(atPath: directory.file("tmp"), withIntermediateDirectories: true)
        try failingScript.write(toFile: directory.file("failing.scenario"), atomically: true, encoding: .utf8)
        if command.needsStore { try FileManager.default.copyItem(atPath: template, toPath: directory.file("state")) }
        return directory
    }

    /// The temporary state directories a run left in its TMPDIR (none: they hold key files).
    static func leftovers(_ folder: String) -> [String] {
        let user = folder + "/tmp/protected-store-\(geteuid())"
        return ((try? FileManager.default.contentsOfDirectory(atPath: user)) ?? []).filter { !$0.hasSuffix(".lock") }
    }

    @Test("a command whose standard output or standard error is closed, full or a broken pipe is not killed, exits as it does with its output written, and does its work", arguments: cases)
    func unwritableOutput(command: Case) throws {
        let templateDirectory = TemporaryDirectory()
        let template = templateDirectory.file("state")
        if command.needsStore { try Self.makeTemplate(template) }
        // With its output written: the status every other run must end with.
        let baseline = try Self.prepare(command, template: template)
        let written = try Self.launch(command.arguments(baseline.path), input: command.input, folder: baseline.path, stream: 1, condition: nil)
        let said = ((try? String(contentsOfFile: baseline.file("out2"), encoding: .utf8)) ?? "")
        #expect(written == Ending(status: command.status, signal: nil), "\(command): \(written) \(said)")
        #expect(try command.workDone(baseline.path) == nil, "\(command) with its output written")

        for stream: Int32 in [1, 2] {
            for condition in Condition.allCases {
                let run = try Self.prepare(command, template: template)
                let ending = try Self.launch(command.arguments(run.path), input: command.input, folder: run.path, stream: stream, condition: condition)
                let what = "\(command) with standard \(stream == 1 ? "output" : "error") \(condition.rawValue)"
                let other = (try? String(contentsOfFile: run.file("out\(3 - stream)"), encoding: .utf8)) ?? ""
                let expected: Int32 = command.endsOnBrokenPipe && stream == 1 && condition == .brokenPipe ? 141 : command.status
                #expect(ending == Ending(status: expected, signal: nil), "\(what): \(ending); the other stream: \(other.suffix(600))")
                if expected == command.status {
                    #expect(try command.workDone(run.path) == nil, "\(what): the work was not done")
                }
                #expect(Self.leftovers(run.path).isEmpty, "\(what) left temporary state directories: \(Self.leftovers(run.path))")
            }
        }
    }
}
