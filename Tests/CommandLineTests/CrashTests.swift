import DiskModel
import TestSupport
import Foundation
import Testing

/// The seed and iteration of a crash test's kill, named in every issue of the suite so a failure can be replayed.
/// (Outside `CrashTests`: the suite's traits cannot refer to the type they are attached to.)
enum CrashReplay {
    /// Kills per test: 24 in CI; `PROTECTEDSTORE_CRASH_ITERATIONS=300 swift test --filter CrashTests` for the
    /// long run the README reports.
    static let iterations = ProcessInfo.processInfo.environment["PROTECTEDSTORE_CRASH_ITERATIONS"].flatMap(Int.init) ?? 24

    /// `PROTECTEDSTORE_CRASH_SEED` (decimal, or hexadecimal after 0x) when set, otherwise a fixed seed: each test
    /// draws its kill points from `CrashTests.SeededGenerator(seed:)`, so a seed and an iteration name one kill.
    static let seedVariable = ProcessInfo.processInfo.environment["PROTECTEDSTORE_CRASH_SEED"]
    static let seed: UInt64 = seedVariable.flatMap(parseSeed) ?? 0x5EED_C4A5
    static func parseSeed(_ text: String) -> UInt64? {
        text.lowercased().hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
    }

    /// The iteration a test is in, for the issues it records.
    @TaskLocal static var iteration: Int?

    /// What every issue of the suite adds: how to replay it.
    static var comment: Comment {
        Comment(
            rawValue: "replay: PROTECTEDSTORE_CRASH_SEED=\(seed) PROTECTEDSTORE_CRASH_ITERATIONS=\(iterations)"
                + (iteration.map { ", iteration \($0)" } ?? ", after the iterations"))
    }
}

/// Kills a real `protected-store shell` right after its N-th acknowledgement (or N-th change to its state
/// directory), N from a seeded generator; every issue names the seed and iteration to replay it with.
// The time limit grows with the iterations (3 minutes up to 99, 12 for 300): a kill now waits for the child's
// progress, so a loaded machine makes a run slower instead of killing it earlier.
@Suite(
    "Crashes: SIGKILL of a real process", .timeLimit(.minutes(3 + 3 * (CrashReplay.iterations / 100))),
    .compactMapIssues { issue in
        // Once: a suite's issue-handling trait applies to the suite and again to each test in it.
        var issue = issue
        if !issue.comments.contains(CrashReplay.comment) { issue.comments.append(CrashReplay.comment) }
        return issue
    })
struct CrashTests {
    static let iterations = CrashReplay.iterations

    /// SplitMix64 (as `ProtectedStoreHarness.SplitMix64`, which this target does not link): the same seed draws
    /// the same kill points on every machine.
    struct SeededGenerator: RandomNumberGenerator {
        private var state: UInt64

        init(seed: UInt64) { state = seed }

        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// A generator on the seed; an unreadable `PROTECTEDSTORE_CRASH_SEED` fails the test rather than running another seed.
    func seededGenerator() -> SeededGenerator {
        if let text = CrashReplay.seedVariable {
            #expect(CrashReplay.parseSeed(text) != nil, "PROTECTEDSTORE_CRASH_SEED=\(text) is not a decimal or 0x-hexadecimal UInt64")
        }
        return SeededGenerator(seed: CrashReplay.seed)
    }

    /// Runs `body` for each iteration, with the iteration named in the issues it records.
    func forEachIteration(_ body: (Int) throws -> Void) rethrows {
        for iteration in 0..<Self.iterations {
            try CrashReplay.$iteration.withValue(iteration) { try body(iteration) }
        }
    }

    /// What `runAndKill` counts to choose its moment.
    enum Progress {
        /// Lines the child printed for which the closure holds (acknowledgements).
        case lines((Substring) -> Bool)
        /// Changes to the entries of the state directory (one created, deleted, renamed, or written and closed),
        /// watched with inotify; a printed line for which the closure holds (the last acknowledgement) ends the
        /// wait too, for a count past the changes the child makes.
        case fileChanges(orLine: (Substring) -> Bool)
    }

    /// Changes a child has to make within this, or it is taken for hung: a safety net, never the kill moment.
    static let hungAfter: Duration = .seconds(60)

    /// Starts the shell on `stateDirectory`, feeds it `lines`, and kills it with SIGKILL as soon as it has made
    /// `count` steps of `progress` (0: at once), read as they happen (poll(2) on its stdout and the inotify
    /// descriptor). Its stdin stays open until then, so it waits for more input instead of exiting. Returns
    /// what it printed, including what it printed before the kill that had not been read yet.
    func runAndKill(_ lines: [String], stateDirectory: String, after count: Int, of progress: Progress) throws -> String {
        var watch: Int32 = -1
        if case .fileChanges = progress {
            watch = inotify_init1(Int32(IN_CLOEXEC))
            let changes = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE)
            guard watch >= 0, inotify_add_watch(watch, stateDirectory, changes) >= 0 else {
                Issue.record("inotify on \(stateDirectory) failed: errno \(errno)")
                if watch >= 0 { close(watch) }
                return ""
            }
        }
        defer { if watch >= 0 { close(watch) } }

        let process = Process()
        process.executableURL = ProtectedStoreBinary.url
        process.arguments = ["shell", "--fast-kdf", "--state-dir", stateDirectory]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Feed stdin on a thread of its own (as `ProtectedStoreBinary.run` does): a kill while it is written must
        // not block the test or end it with SIGPIPE.
        signal(SIGPIPE, SIG_IGN)
        let fed = DispatchSemaphore(value: 0)
        let text = Data((lines.joined(separator: "\n") + "\n").utf8)
        Thread {
            try? input.fileHandleForWriting.write(contentsOf: text)
            fed.signal()
        }.start()

        var printed: [UInt8] = []
        var scanned = 0  // bytes of `printed` already split into lines
        var made = 0
        var lastLineSeen = false
        let reader = output.fileHandleForReading.fileDescriptor
        let deadline = ContinuousClock.now + Self.hungAfter
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while made < count && !lastLineSeen {
            let left = deadline - ContinuousClock.now
            guard left > .zero else {
                Issue.record("hung: the child made \(made) of the \(count) steps to its kill within \(Self.hungAfter); it printed \(printed.count) bytes")
                break
            }
            var descriptors = [pollfd(fd: reader, events: Int16(POLLIN), revents: 0), pollfd(fd: watch, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&descriptors, 2, Int32(left.components.seconds * 1000 + 1))
            if ready < 0 && errno == EINTR { continue }
            guard ready >= 0 else {
                Issue.record("poll failed: errno \(errno)")
                break
            }
            if descriptors[1].revents != 0 {
                let got = read(watch, &buffer, buffer.count)
                var offset = 0
                // Each record: struct inotify_event (wd, mask, cookie, len: 4 bytes each), then `len` bytes of name.
                while offset + 16 <= got {
                    made += 1
                    offset += 16 + buffer[offset + 12..<offset + 16].reversed().reduce(0) { $0 << 8 | Int($1) }
                }
            }
            if descriptors[0].revents != 0 {
                let got = read(reader, &buffer, buffer.count)
                guard got > 0 else {
                    Issue.record("the child exited after \(made) of the \(count) steps to its kill; it printed: \(String(decoding: printed.suffix(500), as: UTF8.self))")
                    break
                }
                printed += buffer[0..<got]
                while let newline = printed[scanned...].firstIndex(of: UInt8(ascii: "\n")) {
                    let line = Substring(String(decoding: printed[scanned..<newline], as: UTF8.self))
                    scanned = newline + 1
                    switch progress {
                    case .lines(let counts): if counts(line) { made += 1 }
                    case .fileChanges(let isLast): if isLast(line) { lastLineSeen = true }
                    }
                }
            }
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        printed += output.fileHandleForReading.readDataToEndOfFile()
        _ = fed.wait(timeout: .now() + .seconds(10))
        try? input.fileHandleForWriting.close()
        return String(decoding: printed, as: UTF8.self)
    }

    /// Sets up a device with a store in a new state directory.
    func setUpDevice(in directory: TemporaryDirectory) throws -> String {
        let state = directory.file("state")
        let setUp = try ProtectedStoreBinary.shell(["device setup --passcode 1", "app launch", "app terminate"], state: state)
        #expect(setUp.status == 0)
        return state
    }

    /// Kills a shell on one device `iterations` times, each right after a number of acknowledged writes drawn
    /// from `killAfter` (fewer than `lines(iteration)` holds, so a write is always under way), and collects the
    /// writes it acknowledged: `acknowledgement` reads a printed line as (key, value), or `nil` for any other
    /// line. Then checks them all after a restart.
    func expectAcknowledgedWritesSurviveKills(
        killAfter: ClosedRange<Int>, also extra: [String], lines: (Int) -> [String],
        acknowledgement: @escaping (Substring) -> (key: String, value: String)?
    ) throws {
        let directory = TemporaryDirectory()
        let state = try setUpDevice(in: directory)
        var generator = seededGenerator()
        var acknowledged: [String: String] = [:]
        try forEachIteration { iteration in
            let printed = try runAndKill(
                lines(iteration), stateDirectory: state, after: Int.random(in: killAfter, using: &generator),
                of: .lines { acknowledgement($0) != nil })
            for line in printed.split(separator: "\n") {
                if let (key, value) = acknowledgement(line) { acknowledged[key] = value }
            }
        }
        #expect(acknowledged.count > Self.iterations, "the kills left some acknowledged writes to check")
        try ProtectedStoreBinary.expectStoreHolds(acknowledged, state: state, also: extra)
    }

    @Test("SIGKILL during inbox appends and merges: every acknowledged write is in the store after restart and unlock")
    func killDuringInboxAppendAndMerge() throws {
        // 1 to 100 of the 400: about what 0–100 ms of appends (locked) or appends and merges (unlocked) acknowledge.
        try expectAcknowledgedWritesSurviveKills(killAfter: 1...100, also: ["expect inbox 0", "expect integrity ok"]) {
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

    @Test("SIGKILL during merges with quarantined records among them: no acknowledged record lost, none quarantined twice, none applied")
    func killDuringMergeWithQuarantine() throws {
        let directory = TemporaryDirectory()
        let state = try setUpDevice(in: directory)
        var generator = seededGenerator()
        var acknowledged: [String: String] = [:]
        var quarantinedKeys: Set<String> = []
        func acknowledgement(_ line: Substring) -> String? {
            guard line.hasPrefix("inbox: sealed record ") else { return nil }
            return String(line.split(separator: " ").last!)
        }
        try forEachIteration { iteration in
            // Every 7th record is of a kind this tool's app does not know: the merge quarantines it.
            let lines = (iteration % 2 == 0 ? [] : ["device unlock --passcode 1", "app launch"])
                + (0..<300).map { n in
                    n % 7 == 3 ? "inbox put --kind from-the-future q\(iteration)-\(n) x" : "inbox put k\(iteration)-\(n) v\(iteration)-\(n)"
                }
            let printed = try runAndKill(
                lines, stateDirectory: state, after: Int.random(in: 1...100, using: &generator),
                of: .lines { acknowledgement($0) != nil })
            for line in printed.split(separator: "\n") {
                guard let key = acknowledgement(line) else { continue }
                if key.hasPrefix("q") { quarantinedKeys.insert(key) } else { acknowledged[key] = "v" + key.dropFirst() }
            }
        }
        #expect(quarantinedKeys.count > 0 && acknowledged.count > Self.iterations)
        try ProtectedStoreBinary.expectStoreHolds(
            acknowledged, state: state,
            also: ["expect inbox 0", "expect integrity ok"] + quarantinedKeys.sorted().map { "expect missing \($0)" })
        let listing = try ProtectedStoreBinary.shell(["device unlock --passcode 1", "app launch", "inbox quarantine"], state: state)
        let count = listing.output.split(separator: "\n").first { $0.hasSuffix("in quarantine") }
            .flatMap { Int($0.split(separator: " ")[1]) }
        // Each kill can leave at most one record written but not yet acknowledged.
        #expect(count.map { $0 >= quarantinedKeys.count && $0 <= quarantinedKeys.count + Self.iterations } == true,
            "quarantined \(count.map(String.init) ?? "?") records for \(quarantinedKeys.count) acknowledged")
        let ids = listing.output.split(separator: "\n").filter { $0.hasPrefix("  ") }.map { $0.split(separator: " ")[0] }
        #expect(Set(ids).count == ids.count, "no record is quarantined twice")
    }

    @Test("SIGKILL during ordinary writes: every acknowledged write is present after restart, and the store passes integrity_check")
    func killDuringWrites() throws {
        // Each put is followed by a get of the same key: operations run in order, so the get's output
        // ("key = value") acknowledges that the put committed.
        // Killed after 1 to 100 of the 300: the work of the 0–100 ms the kill used to wait.
        try expectAcknowledgedWritesSurviveKills(killAfter: 1...100, also: ["expect integrity ok"]) { iteration in
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
        var generator = seededGenerator()
        var current = "1"
        try forEachIteration { _ in
            // Alternate between two passcodes; `status` after each change acknowledges it (commands run in order).
            var passcodes = [current]
            var lines = ["device unlock --passcode \(current)"]
            for _ in 0..<40 {
                let next = passcodes.last == "1" ? "2" : "1"
                lines += ["device change-passcode --old \(passcodes.last!) --new \(next)", "status"]
                passcodes.append(next)
            }
            // Killed right after the N-th acknowledgement, while change N + 1 runs.
            let printed = try runAndKill(
                lines, stateDirectory: state, after: Int.random(in: 1..<40, using: &generator),
                of: .lines { $0.hasPrefix("time ") })
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
        var generator = seededGenerator()
        var created = 0
        try forEachIteration { _ in
            let directory = TemporaryDirectory()
            let state = directory.file("state")
            let setUp = try ProtectedStoreBinary.shell(["device setup --passcode 1"], state: state)
            #expect(setUp.status == 0)
            // Creation makes about 20 changes in the state directory (marker, key file, database, journal, inbox
            // key); the kill lands right after one of them, or at once (0), or, past the last, after the
            // acknowledgement.
            let printed = try runAndKill(
                ["device unlock --passcode 1", "app launch --protection complete", "put created yes", "get created"],
                stateDirectory: state, after: Int.random(in: 0...24, using: &generator),
                of: .fileChanges { $0 == "created = yes" })
            let acknowledged = printed.contains("created = yes")
            if acknowledged { created += 1 }
            try ProtectedStoreBinary.expectStoreHolds(acknowledged ? ["created": "yes"] : [:], state: state, also: ["expect integrity ok"])
        }
        #expect(created < Self.iterations, "some kills landed before the first write was acknowledged")
    }
}
