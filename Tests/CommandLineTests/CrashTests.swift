import TestSupport
import Foundation
import Testing

@Suite("Crashes: SIGKILL of a real process", .timeLimit(.minutes(3)))
struct CrashTests {
    /// What a child process printed so far, collected as it arrives.
    final class OutputCollector: @unchecked Sendable {
        // @unchecked Sendable: `data` is only touched under `lock`.
        private var data = Data()
        private let lock = NSLock()

        func append(_ more: Data) {
            lock.lock()
            data.append(more)
            lock.unlock()
        }

        var text: String {
            lock.lock()
            defer { lock.unlock() }
            return String(decoding: data, as: UTF8.self)
        }
    }

    /// Starts the shell on `stateDirectory`, feeds it `lines`, and once it has printed `marker` (it is busy
    /// acknowledging writes) kills it with SIGKILL after a further `delay`. Returns what it printed.
    func runAndKill(_ lines: [String], stateDirectory: String, once marker: String, after delay: Duration) throws -> String {
        let process = Process()
        process.executableURL = ProtectedStoreBinary.url
        process.arguments = ["shell", "--fast-kdf", "--state-dir", stateDirectory]
        let input = Pipe()
        let output = Pipe()
        let collected = OutputCollector()
        output.fileHandleForReading.readabilityHandler = { collected.append($0.availableData) }
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        input.fileHandleForWriting.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        // A slow build (a sanitizer, a loaded machine) starts late: wait until writing is under way, so the
        // kill lands among the writes and not before the first one. Give up waiting after 20 s.
        let waited = ContinuousClock.now
        while !collected.text.contains(marker) && process.isRunning && ContinuousClock.now - waited < .seconds(20) {
            usleep(2_000)
        }
        let (seconds, attoseconds) = delay.components
        usleep(useconds_t(seconds * 1_000_000 + attoseconds / 1_000_000_000_000))
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
        collected.append(output.fileHandleForReading.readDataToEndOfFile())
        try? input.fileHandleForWriting.close()
        return collected.text
    }

    /// Sets up a device with a store in a new state directory.
    func setUpDevice(in directory: TemporaryDirectory) throws -> String {
        let state = directory.file("state")
        let setUp = try ProtectedStoreBinary.run(
            ["shell", "--fast-kdf", "--state-dir", state], input: "device setup --passcode 1\napp launch\napp terminate\n")
        #expect(setUp.status == 0)
        return state
    }

    /// Restarts, unlocks, launches, and checks every acknowledged write (and `extra` expectations).
    func expectAcknowledged(_ acknowledged: [String: String], in state: String, also extra: [String]) throws {
        let check = try ProtectedStoreBinary.run(
            ["shell", "--fast-kdf", "--state-dir", state],
            input: (["device unlock --passcode 1", "app launch", "expect store ready"] + extra
                + acknowledged.keys.sorted().map { "expect value \($0) \(acknowledged[$0]!)" }).joined(separator: "\n") + "\n")
        #expect(check.status == 0, "\(check.output.split(separator: "\n").filter { $0.contains("FAILED") }.prefix(5))")
        #expect(!check.output.contains("FAILED"))
    }

    @Test("SIGKILL during inbox appends and merges: every acknowledged write is in the store after restart and unlock")
    func killDuringInboxAppendAndMerge() throws {
        let directory = TemporaryDirectory()
        let state = try setUpDevice(in: directory)
        var generator = SystemRandomNumberGenerator()
        var acknowledged: [String: String] = [:]
        let iterations = 24
        for iteration in 0..<iterations {
            // Half the runs unlock and launch first, so merges run while records are appended and killed.
            var lines = iteration % 2 == 0 ? [] : ["device unlock --passcode 1", "app launch"]
            lines += (0..<400).map { "inbox put k\(iteration)-\($0) v\(iteration)-\($0)" }
            let printed = try runAndKill(
                lines, stateDirectory: state, once: "inbox: sealed record",
                after: .milliseconds(Int.random(in: 0...100, using: &generator)))
            for line in printed.split(separator: "\n") where line.hasPrefix("inbox: sealed record ") {
                let key = String(line.split(separator: " ").last!)
                acknowledged[key] = "v" + key.dropFirst()
            }
        }
        #expect(acknowledged.count > iterations, "the kills left some acknowledged writes to check")
        try expectAcknowledged(acknowledged, in: state, also: ["expect inbox 0", "expect integrity ok"])
    }

    @Test("SIGKILL during ordinary writes: every acknowledged write is present after restart, and the store passes integrity_check")
    func killDuringWrites() throws {
        let directory = TemporaryDirectory()
        let state = try setUpDevice(in: directory)
        var generator = SystemRandomNumberGenerator()
        var acknowledged: [String: String] = [:]
        let iterations = 24
        for iteration in 0..<iterations {
            // Each put is followed by a get of the same key: operations run in order, so the get's output
            // ("key = value") acknowledges that the put committed.
            var lines = ["device unlock --passcode 1", "app launch"]
            for index in 0..<300 {
                lines += ["put w\(iteration)-\(index) x\(iteration)-\(index)", "get w\(iteration)-\(index)"]
            }
            let printed = try runAndKill(
                lines, stateDirectory: state, once: " = x", after: .milliseconds(Int.random(in: 0...100, using: &generator)))
            for line in printed.split(separator: "\n") where line.hasPrefix("w") && line.contains(" = ") {
                let parts = line.split(separator: " ")
                acknowledged[String(parts[0])] = String(parts[2])
            }
        }
        #expect(acknowledged.count > iterations, "the kills left some acknowledged writes to check")
        try expectAcknowledged(acknowledged, in: state, also: ["expect integrity ok"])
    }
}
