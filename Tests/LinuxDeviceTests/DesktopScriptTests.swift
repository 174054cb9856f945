import Foundation
import TestSupport
import Testing

/// `scripts/try-on-desktop.sh`, the README's script for a person's own desktop, run end to end against a mock
/// logind: a device agent locked by the session (`device serve --session`), an app process with a class-A store,
/// and a third process that unlocks with the passcode.
@Suite(
    "scripts/try-on-desktop.sh against a mock logind", .serialized,
    .enabled(if: MockBuses.available, Comment(rawValue: MockBuses.missing)), .timeLimit(.minutes(3)))
struct DesktopScriptTests {
    /// What a child process printed so far, read on another thread.
    final class Output: @unchecked Sendable {
        // @unchecked Sendable: `data` is read and written only with `lock` held.
        private let lock = NSLock()
        private var data = Data()
        func append(_ more: Data) { lock.withLock { data.append(more) } }
        var text: String { lock.withLock { String(decoding: data, as: UTF8.self) } }
    }

    /// The tool under test: `PROTECTED_STORE_TOOL` from the environment, else the binary of this build.
    static let tool = ProcessInfo.processInfo.environment["PROTECTED_STORE_TOOL"] ?? SessionCommandTests.binary

    @Test("through device serve --session with two client processes: the session's lock closes the app's class-A store after the grace period, the session's unlock does not reopen it, the passcode does")
    func desktopScriptEndToEnd() async throws {
        let logind = try MockLogind()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [SQLCipher4Oracle.packageRoot + "/scripts/try-on-desktop.sh", "--bus-address", logind.bus.address]
        var environment = ProcessInfo.processInfo.environment
        // The tool the script runs: PROTECTED_STORE_TOOL when the test run is given one (`make deb-check`: the
        // installed package's /usr/bin/protected-store), else this build's.
        environment["PROTECTED_STORE_TOOL"] = Self.tool
        // The agent's socket goes in the user's runtime directory: a temporary one stands in for /run/user/UID.
        let runtime = TemporaryDirectory()
        environment["XDG_RUNTIME_DIR"] = runtime.path
        process.environment = environment
        #expect(FileManager.default.isExecutableFile(atPath: Self.tool), "no tool at \(Self.tool)")
        let input = Pipe()
        let pipe = Pipe()
        process.standardInput = input
        process.standardOutput = pipe
        process.standardError = pipe
        let output = Output()
        pipe.fileHandleForReading.readabilityHandler = { handle in output.append(handle.availableData) }
        try process.run()
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            pipe.fileHandleForReading.readabilityHandler = nil
        }
        #expect(await eventually(within: .seconds(60)) { output.text.contains("Now lock your screen") }, "\(output.text)")
        try logind.setLockedHint(true)
        try await Task.sleep(for: .seconds(7))  // the script's grace period is 5 s, on the real clock
        try logind.setLockedHint(false)
        input.fileHandleForWriting.write(Data("\n".utf8))
        #expect(await eventually(within: .seconds(60)) { !process.isRunning }, "\(output.text)")
        let text = output.text
        #expect(process.terminationStatus == 0, "\(text)")
        let afterLock = try #require(text.range(of: "Now lock your screen")).upperBound
        let afterPasscode = try #require(text.range(of: "The passcode brings the store back")).upperBound
        let locked = text[afterLock..<afterPasscode]
        #expect(locked.contains("device          locked"), "\(locked)")
        #expect(locked.contains("store           waiting (complete)"), "\(locked)")
        #expect(!locked.contains("complete-unless-open"), "class A and B keys still held after the grace period: \(locked)")
        let unlocked = text[afterPasscode...]
        #expect(unlocked.contains("store           ready (complete)"), "\(unlocked)")
        #expect(unlocked.contains("note = \"written before the lock\""), "\(unlocked)")
        // The README's transcript of the script is what it printed here, its temporary paths, bus address and
        // process ids written as placeholders.
        let shown = try Self.readmeTranscript()
        let printed = Self.normalized(text, bus: logind.bus.address, runtime: runtime.path)
        #expect(printed == shown, "README.md's transcript of scripts/try-on-desktop.sh differs from what it printed:\n\(printed)")
    }

    /// The block after `<!-- transcript: scripts/try-on-desktop.sh -->` in README.md.
    static func readmeTranscript() throws -> String {
        let readme = try String(contentsOfFile: SQLCipher4Oracle.packageRoot + "/README.md", encoding: .utf8)
        let named = try #require(readme.range(of: "<!-- transcript: scripts/try-on-desktop.sh -->\n"))
        let marker = try #require(readme.range(of: "```text\n", range: named.upperBound..<readme.endIndex))
        let end = try #require(readme.range(of: "\n```", range: marker.upperBound..<readme.endIndex))
        return String(readme[marker.upperBound..<end.lowerBound])
    }

    /// `text` with what changes from run to run or machine to machine replaced: the throwaway directory, the bus,
    /// the runtime directory, process ids, the socket's name, the device clock, the key source (the TPM's
    /// presence), and the white space at the ends of lines.
    static func normalized(_ text: String, bus: String, runtime: String) -> String {
        var text = text.replacingOccurrences(of: bus, with: "unix:path=BUS")
        text = text.replacingOccurrences(of: runtime, with: "/run/user/UID")
        let placeholders = [
            (#"/[^ ]*/protected-store-try\.[A-Za-z0-9]+"#, "/tmp/protected-store-try.XXXXXX"),
            (#"process \d+"#, "process PID"), (#"GetSessionByPID \d+"#, "GetSessionByPID PID"),
            (#"device-[0-9a-f]+-[0-9a-f]+\.sock"#, "device-DEV-INODE.sock"),
            (#"device clock    [0-9.]+s"#, "device clock    T"),
            // A machine with a TPM says so; the mock's has none.
            (#"key source: [^\n]*"#, "key source: KEY SOURCE"),
        ]
        for (pattern, placeholder) in placeholders {
            text = text.replacingOccurrences(of: pattern, with: placeholder, options: .regularExpression)
        }
        return text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.replacingOccurrences(of: #"\s+$"#, with: "", options: .regularExpression) }
            .joined(separator: "\n").trimmingCharacters(in: .newlines)
    }
}
