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

    /// The folder of this user's temporary state directories in `temporary` (the children's TMPDIR).
    func userFolder(_ temporary: String) -> String { temporary + "/protected-store-\(geteuid())" }

    /// Everything in the per-user folder: state directories and their lock files.
    func leftovers(in temporary: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: userFolder(temporary))) ?? []).sorted()
    }

    /// The temporary state directories in the per-user folder (without their lock files).
    func stateDirectories(in temporary: String) -> [String] {
        leftovers(in: temporary).filter { $0.hasPrefix("protected-store") && !$0.hasSuffix(".lock") }
    }

    /// Waits until the child has a temporary state directory with files in it (beside the `known` ones), and
    /// returns its name.
    @discardableResult
    func waitForStateDirectory(in temporary: String, of process: Process, besides known: Set<String> = []) throws -> String {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, process.isRunning {
            if let name = stateDirectories(in: temporary).first(where: { !known.contains($0) }),
                FileManager.default.fileExists(atPath: userFolder(temporary) + "/" + name + "/hardware/uid.key")
            {
                return name
            }
            Thread.sleep(forTimeInterval: 0.02)
        }
        Issue.record("no temporary state directory appeared in \(userFolder(temporary))")
        return ""
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
        #expect(leftovers(in: temporary).isEmpty, "left behind: \(leftovers(in: temporary))")
        let errors = try String(contentsOfFile: directory.file("stderr"), encoding: .utf8)
        #expect(errors.contains("protected-store: interrupted (SIGINT); removed 1 temporary state directory"), "\(errors)")
    }

    @Test("SIGTERM during run removes its state directory and exits 143")
    func terminatedRun() throws {
        let directory = TemporaryDirectory()
        let temporary = directory.file("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let process = try start(["run", "--fast-kdf", "-"], temporary: temporary, errors: directory.file("stderr"), input: Self.longScript)
        try waitForStateDirectory(in: temporary, of: process)
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 143)
        #expect(leftovers(in: temporary).isEmpty, "left behind: \(leftovers(in: temporary))")
    }

    /// A script that runs long enough to be killed part-way (20,000 durable writes: 20 s in a debug build on a
    /// busy machine), and short enough to parse quickly: `run` parses the whole script before its first command
    /// makes the state directory, and 300,000 lines took 7.7 s in a debug build and over a minute under the
    /// Thread Sanitizer on a loaded machine, past the wait for the directory.
    static let longScript =
        "device setup --passcode 1\napp launch\n" + String(repeating: "put k v\nget k\nclock advance 1s\n", count: 20_000)

    @Test("a SIGKILLed run leaves its state directory with its key files; the next run removes it, and never the directory of a run that is still going")
    func killedRunIsSweptByTheNext() throws {
        let directory = TemporaryDirectory()
        let temporary = directory.file("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let killed = try start(["run", "--fast-kdf", "-"], temporary: temporary, errors: directory.file("stderr-killed"), input: Self.longScript)
        let killedName = try waitForStateDirectory(in: temporary, of: killed)
        let living = try start(["run", "--fast-kdf", "-"], temporary: temporary, errors: directory.file("stderr-living"), input: Self.longScript)
        let livingName = try waitForStateDirectory(in: temporary, of: living, besides: [killedName])
        kill(killed.processIdentifier, SIGKILL)
        killed.waitUntilExit()
        let left = userFolder(temporary) + "/" + killedName
        #expect(FileManager.default.fileExists(atPath: left + "/hardware/uid.key"), "SIGKILL cleans nothing up: the key files stay")
        #expect(FileManager.default.fileExists(atPath: left + "/device/device.keybag"))

        let next = try start(["run", "--fast-kdf", "-"], temporary: temporary, errors: directory.file("stderr-next"), input: "device setup --passcode 1\n")
        next.waitUntilExit()
        #expect(next.terminationStatus == 0, "\((try? String(contentsOfFile: directory.file("stderr-next"), encoding: .utf8)) ?? "")")
        #expect(!FileManager.default.fileExists(atPath: left), "the killed run's keys are still in \(left)")
        #expect(leftovers(in: temporary) == [livingName, livingName + ".lock"], "\(leftovers(in: temporary))")

        kill(living.processIdentifier, SIGTERM)
        living.waitUntilExit()
        #expect(living.terminationStatus == 143)
        #expect(leftovers(in: temporary).isEmpty, "left behind: \(leftovers(in: temporary))")
    }

    @Test("the demo's reader goes away (SIGPIPE, as in `demo | head -1`): the demo removes its state directory and exits 141")
    func brokenPipeDuringDemo() throws {
        let directory = TemporaryDirectory()
        let temporary = directory.file("tmp")
        try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = ProtectedStoreBinary.url
        process.arguments = ["demo"]
        process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": temporary + "/"]) { $1 }
        _ = FileManager.default.createFile(atPath: directory.file("stderr"), contents: nil)
        process.standardError = FileHandle(forWritingAtPath: directory.file("stderr"))
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // The reader goes away before the demo writes (its whole output fits in a pipe's buffer: a reader that
        // waited for a line could close it after a demo that had already ended). The demo makes its directory
        // before its first line.
        try output.fileHandleForReading.close()
        process.waitUntilExit()
        let errors = try String(contentsOfFile: directory.file("stderr"), encoding: .utf8)
        #expect(process.terminationReason == .exit && process.terminationStatus == 141, "\(process.terminationReason) \(process.terminationStatus) \(errors)")
        #expect(leftovers(in: temporary).isEmpty, "left behind: \(leftovers(in: temporary))")
        #expect(errors.contains("protected-store: its output was closed (SIGPIPE); removed 1 temporary state directory"), "\(errors)")
    }
}
