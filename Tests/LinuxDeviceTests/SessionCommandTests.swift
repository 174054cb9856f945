import Foundation
import Testing

/// `protected-store session status` and `session watch`, the built binary against a mock logind.
@Suite("session command", .serialized, .enabled(if: MockBuses.available, Comment(rawValue: MockBuses.missing)))
struct SessionCommandTests {
    /// The binary, built into the test bundle's folder.
    static let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("protected-store").path

    /// Runs the binary to its end; its standard output and exit status.
    static func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test("session status names the bus, the session, how it was found, the lock and the key source")
    func status() throws {
        let logind = try MockLogind()
        try logind.setLockedHint(true)
        let result = try Self.run(["session", "status", "--bus-address", logind.bus.address, "--no-session-bus"])
        #expect(result.status == 0)
        #expect(result.output.contains("lock source: systemd-logind on the bus at \(logind.bus.address)"))
        #expect(result.output.contains("session: c1 (test, \(logind.sessionPath))"))
        #expect(result.output.contains("found by: this process's session (GetSessionByPID"))
        #expect(result.output.contains("session locked: yes"))
        #expect(result.output.contains("key source: file"))
    }

    @Test("session status without logind says the lock source is not found, and why, with exit 1")
    func statusWithoutLogind() throws {
        let bus = try PrivateBus()
        let result = try Self.run(["session", "status", "--bus-address", bus.address, "--no-session-bus"])
        #expect(result.status == 1)
        #expect(result.output.contains("lock source: not found (no-logind)"))
    }

    @Test("a protected-store process is not dumpable: session status reads PR_GET_DUMPABLE 0 in its own process")
    func coreDumpsOff() throws {
        let logind = try MockLogind()
        let found = try Self.run(["session", "status", "--bus-address", logind.bus.address, "--no-session-bus"])
        #expect(found.status == 0)
        #expect(found.output.contains("core dumps: off (this process is not dumpable"), "\(found.output)")
        #expect(found.output.contains("on a lost system bus: the device locks; `device serve --session` exits with status 1"))
        let bare = try PrivateBus()
        let notFound = try Self.run(["session", "status", "--bus-address", bare.address, "--no-session-bus"])
        #expect(notFound.status == 1)
        #expect(notFound.output.contains("core dumps: off (this process is not dumpable"), "\(notFound.output)")
    }

    @Test("session watch prints each lock, unlock and sleep as it happens")
    func watch() async throws {
        let logind = try MockLogind()
        let directory = TemporaryFile()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments = ["session", "watch", "--bus-address", logind.bus.address, "--no-session-bus"]
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: directory.path))
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        func output() -> String { (try? String(contentsOfFile: directory.path, encoding: .utf8)) ?? "" }
        #expect(await eventually { output().contains("watching session c1") })
        try logind.setLockedHint(true)
        #expect(await eventually { output().contains("locked (logind LockedHint)") })
        try logind.setLockedHint(false)
        #expect(await eventually { output().contains("unlocked (logind LockedHint; reported only") })
        try logind.prepareForSleep(true)
        #expect(await eventually { output().contains("sleeping (logind PrepareForSleep true)") })
    }
}

/// An empty file in the temporary folder, removed when released.
final class TemporaryFile {
    let path = NSTemporaryDirectory() + "/protectedstore-watch-\(UUID().uuidString)"
    init() { _ = FileManager.default.createFile(atPath: path, contents: nil) }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}
