import Foundation
import TestSupport
import Testing

/// SIGINT and SIGTERM during `simulate` and `run`: the temporary state directories (they hold key files) are
/// removed, and the exit status is 128 + the signal's number.
@Suite("signals remove the temporary state directories", .timeLimit(.minutes(3)))
struct SignalCleanupTests {
    /// Starts the binary with its temporary folder in `temporary`, input fed on a thread of its own, output
    /// discarded and standard error kept in `temporary/../stderr`.
    func start(_ arguments: [String], temporary: String, errors: String, input: String = "") throws -> Process {
        let process = Process()
        process.executableURL = ProtectedStoreBinary.url
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": temporary + "/"]) { $1 }
        _ = FileManager.default.createFile(atPath: errors, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: errors)
        process.standardOutput = FileHandle.nullDevice
        let stdin = Pipe()
        process.standardInput = stdin
        try process.run()
        signal(SIGPIPE, SIG_IGN)
        Thread {
            try? stdin.fileHandleForWriting.write(contentsOf: Data(input.utf8))
            try? stdin.fileHandleForWriting.close()
        }.start()
        return process
    }

    func stateDirectories(in temporary: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []).filter { $0.hasPrefix("protected-store") }
    }

    /// Waits until the child has a temporary state directory with files in it.
    func waitForStateDirectory(in temporary: String, of process: Process) throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, process.isRunning {
            if let name = stateDirectories(in: temporary).first,
                !((try? FileManager.default.contentsOfDirectory(atPath: temporary + "/" + name)) ?? []).isEmpty
            {
                return
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        Issue.record("no temporary state directory appeared in \(temporary)")
    }

    @Test("Ctrl-C (SIGINT) during simulate removes its state directory and exits 130")
    func interruptedSimulation() throws {
        let directory = TemporaryDirectory()
        let temporary = directory.file("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let process = try start(["simulate", "--seeds", "100000"], temporary: temporary, errors: directory.file("stderr"))
        try waitForStateDirectory(in: temporary, of: process)
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 130)
        #expect(stateDirectories(in: temporary).isEmpty, "left behind: \(stateDirectories(in: temporary))")
        let errors = try String(contentsOfFile: directory.file("stderr"), encoding: .utf8)
        #expect(errors.contains("protected-store: interrupted (SIGINT); removed 1 temporary state directory"), "\(errors)")
    }

    @Test("SIGTERM during run removes its state directory and exits 143")
    func terminatedRun() throws {
        let directory = TemporaryDirectory()
        let temporary = directory.file("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let script = "device setup --passcode 1\napp launch\n" + String(repeating: "put k v\nget k\nclock advance 1s\n", count: 100_000)
        let process = try start(["run", "--fast-kdf", "-"], temporary: temporary, errors: directory.file("stderr"), input: script)
        try waitForStateDirectory(in: temporary, of: process)
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 143)
        #expect(stateDirectories(in: temporary).isEmpty, "left behind: \(stateDirectories(in: temporary))")
    }
}
