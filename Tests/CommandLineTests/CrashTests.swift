import TestSupport
import Foundation
import Testing

@Suite("Crashes: SIGKILL of a real process", .timeLimit(.minutes(3)))
struct CrashTests {
    /// Kills per test: 24 in CI; `PROTECTEDSTORE_CRASH_ITERATIONS=300 swift test --filter CrashTests` for the
    /// long run the README reports.
    static let iterations = ProcessInfo.processInfo.environment["PROTECTEDSTORE_CRASH_ITERATIONS"].flatMap(Int.init) ?? 24
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
    /// acknowledging writes; `nil`: at once) kills it with SIGKILL after a further `delay`. Returns what it printed.
    func runAndKill(_ lines: [String], stateDirectory: String, once marker: String?, after delay: Duration) throws -> String {
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
        while let marker, !collected.text.contains(marker) && process.isRunning && ContinuousClock.now - waited < .seconds(20) {
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
        let setUp = try ProtectedStoreBinary.shell(["device setup --passcode 1", "app launch", "app terminate"], state: state)
        #expect(setUp.status == 0)
        return state
    }

    /// Kills a shell on one device `iterations` times, each at a random moment (0–100 ms) after it printed
    /// `marker`, feeding it `lines(iteration)`, and collects the writes it acknowledged: `acknowledgement` reads
    /// a printed line as (key, value), or `nil` for any other line. Then checks them all after a restart.
    func expectAcknowledgedWritesSurviveKills(
        once marker: String, also extra: [String], lines: (Int) -> [String],
        acknowledgement: (Substring) -> (key: String, value: String)?
    ) throws {
        let directory = TemporaryDirectory()
        let state = try setUpDevice(in: directory)
        var generator = SystemRandomNumberGenerator()
        var acknowledged: [String: String] = [:]
        for iteration in 0..<Self.iterations {
            let printed = try runAndKill(
                lines(iteration), stateDirectory: state, once: marker,
                after: .milliseconds(Int.random(in: 0...100, using: &generator)))
            for line in printed.split(separator: "\n") {
                if let (key, value) = acknowledgement(line) { acknowledged[key] = value }
            }
        }
        #expect(acknowledged.count > Self.iterations, "the kills left some acknowledged writes to check")
        try ProtectedStoreBinary.expectStoreHolds(acknowledged, state: state, also: extra)
    }

    @Test("SIGKILL during inbox appends and merges: every acknowledged write is in the store after restart and unlock")
    func killDuringInboxAppendAndMerge() throws {
        try expectAcknowledgedWritesSurviveKills(once: "inbox: sealed record", also: ["expect inbox 0", "expect integrity ok"]) {
            iteration in
            // Half the runs unlock and launch first, so merges run while records are appended and killed.
            (iteration % 2 == 0 ? [] : ["device unlock --passcode 1", "app launch"])
                + (0..<400).map { "inbox put k\(iteration)-\($0) v\(iteration)-\($0)" }
        } acknowledgement: { line in
            guard line.hasPrefix("inbox: sealed record ") else { return nil }
            let key = String(line.split(separator: " ").last!)
            return (key, "v" + key.dropFirst())
        }
    }

    @Test("SIGKILL during ordinary writes: every acknowledged write is present after restart, and the store passes integrity_check")
    func killDuringWrites() throws {
        // Each put is followed by a get of the same key: operations run in order, so the get's output
        // ("key = value") acknowledges that the put committed.
        try expectAcknowledgedWritesSurviveKills(once: " = x", also: ["expect integrity ok"]) { iteration in
            ["device unlock --passcode 1", "app launch"]
                + (0..<300).flatMap { ["put w\(iteration)-\($0) x\(iteration)-\($0)", "get w\(iteration)-\($0)"] }
        } acknowledgement: { line in
            guard line.hasPrefix("w"), line.contains(" = ") else { return nil }
            let parts = line.split(separator: " ")
            return (String(parts[0]), String(parts[2]))
        }
    }

    @Test("SIGKILL during passcode changes: the device then unlocks with the last acknowledged passcode (or the one being set), and the store opens with its data")
    func killDuringPasscodeChange() throws {
        let directory = TemporaryDirectory()
        let state = try setUpDevice(in: directory)
        let before = try ProtectedStoreBinary.shell(["device unlock --passcode 1", "app launch", "put kept yes"], state: state)
        #expect(before.status == 0)
        var generator = SystemRandomNumberGenerator()
        var current = "1"
        for _ in 0..<Self.iterations {
            // Alternate between two passcodes; `status` after each change acknowledges it (commands run in order).
            var passcodes = [current]
            var lines = ["device unlock --passcode \(current)"]
            for _ in 0..<40 {
                let next = passcodes.last == "1" ? "2" : "1"
                lines += ["device change-passcode --old \(passcodes.last!) --new \(next)", "status"]
                passcodes.append(next)
            }
            let printed = try runAndKill(
                lines, stateDirectory: state, once: "time ", after: .milliseconds(Int.random(in: 0...60, using: &generator)))
            let acknowledged = printed.split(separator: "\n").filter { $0.hasPrefix("time ") }.count
            // The change after the last acknowledged one may or may not have landed; no other passcode may work.
            let candidates = [passcodes[acknowledged]] + (acknowledged + 1 < passcodes.count ? [passcodes[acknowledged + 1]] : [])
            let unlocked = try candidates.first { passcode in
                let check = try ProtectedStoreBinary.shell(["device unlock --passcode \(passcode)", "expect device unlocked"], state: state)
                return check.status == 0
            }
            #expect(unlocked != nil, "neither \(candidates) unlocks after \(acknowledged) acknowledged changes")
            current = unlocked ?? current
        }
        try ProtectedStoreBinary.expectStoreHolds(["kept": "yes"], state: state, passcode: current, also: ["expect integrity ok"])
    }

    @Test("SIGKILL during store creation: the next launch opens or creates the store; never a store without its key")
    func killDuringStoreCreation() throws {
        var generator = SystemRandomNumberGenerator()
        var created = 0
        for _ in 0..<Self.iterations {
            let directory = TemporaryDirectory()
            let state = directory.file("state")
            let setUp = try ProtectedStoreBinary.shell(["device setup --passcode 1"], state: state)
            #expect(setUp.status == 0)
            let printed = try runAndKill(
                ["device unlock --passcode 1", "app launch --protection complete", "put created yes", "get created"],
                stateDirectory: state, once: nil, after: .milliseconds(Int.random(in: 0...80, using: &generator)))
            let acknowledged = printed.contains("created = yes")
            if acknowledged { created += 1 }
            try ProtectedStoreBinary.expectStoreHolds(acknowledged ? ["created": "yes"] : [:], state: state, also: ["expect integrity ok"])
        }
        #expect(created < Self.iterations, "some kills landed before the first write was acknowledged")
    }
}
