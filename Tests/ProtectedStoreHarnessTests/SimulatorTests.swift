import DiskModel
import TestSupport
import Foundation
import ProtectedStore
import Testing

@testable import ProtectedStoreHarness

@MainActor
@Suite("Simulator", .timeLimit(.minutes(10)))
struct SimulatorTests {
    @Test("the same seed gives the same run, step for step")
    func deterministic() async throws {
        for seed: UInt64 in [3, 17] {
            let first = try await Simulator.run(seed: seed, steps: 150)
            let second = try await Simulator.run(seed: seed, steps: 150)
            #expect(first.trace == second.trace)
            #expect(first.trace.count == 150)
            #expect(first.commands.map(\.scriptLine) == second.commands.map(\.scriptLine))
        }
        let other = try await Simulator.run(seed: 4, steps: 150)
        #expect(other.trace != (try await Simulator.run(seed: 3, steps: 150)).trace)
    }

    @Test("a bounded run of the real stack holds every invariant")
    func boundedRunHolds() async throws {
        for seed: UInt64 in 1...15 {
            let run = try await Simulator.run(seed: seed, steps: 120)
            #expect(run.violation == nil, "seed \(seed): \(run.violation.map(String.init(describing:)) ?? "")")
        }
    }

    /// Seeds the 10,000-seed `make simulate-long` stopped at: a count left at the erase limit that the next
    /// attempt counted past (9016, a product bug), a damage that left an inbox record at the size limit as it
    /// was (5415 and 7205, the generator's), and two failed appends of which the merge kept the second (2535, the
    /// oracle's choice by counts alone).
    @Test("the seeds simulate-long stopped at hold", arguments: [9016, 5415, 7205, 2535] as [UInt64])
    func simulateLongSeedsHold(seed: UInt64) async throws {
        let run = try await Simulator.run(seed: seed, steps: 200)
        #expect(run.violation == nil, "seed \(seed): \(run.violation.map(String.init(describing:)) ?? "")")
    }

    /// Seed 920101: an attempt refused because the sync of its count failed, a reboot that read the count, then a
    /// power cut that dropped it. The oracle kept the count the reboot read and expected `passcode-delay`; the
    /// device, back at the last durable count, unlocked. An attempt never answered need not count: the oracle
    /// reads the count from the device at every boot up to the next power cut.
    @Test("a count never made durable and then dropped by a power cut after a reboot: the oracle agrees with the device (seed 920101, and its minimized script)")
    func unsyncedAttemptCountAfterRebootAndPowerCut() async throws {
        let lines = [
            "device setup --passcode 1234 --grace 10s", "device reboot", "device change-passcode --old 0000 --new 2580",
            "device unlock --passcode 0000", "device unlock --passcode 0000", "device unlock --passcode 0000",
            "fault next-io ENOSPC --after 4", "device unlock --passcode 0000", "device reboot",
            "device power-cut --mode drop --seed 872277", "device unlock --passcode 1234",
        ]
        let commands = try lines.compactMap { try ScenarioParser.parse($0) }
        let replayed = try await Simulator.replay(commands, seed: 920101)
        #expect(replayed.violation == nil, "\(replayed.violation.map(String.init(describing:)) ?? "")")
        let run = try await Simulator.run(seed: 920101, steps: 200)
        #expect(run.violation == nil, "\(run.violation.map(String.init(describing:)) ?? "")")
    }

    @Test(
        "a planted bug is found, minimized, and the script fails with the bug and holds without it",
        arguments: [
            (PlantedFault.keepCoordinatorAfterClose, 5, 40),
            (.missingInboxFsync, 6, 40),
            (.missingDirectoryFsync, 6, 40),
            // Found through the generator's damage mode: an inbox record's length made to claim past the end.
            (.mergeTruncatesUnread, 10, 40),
            // Found through a fault inside the erasing attempt, then a reboot or a power cut; only one seed in
            // eight erases its device, so the search is longer.
            (.wipeNotRolledForward, 10, 80),
        ])
    func findsPlantedBug(fault: PlantedFault, longestScript: Int, seeds: UInt64) async throws {
        var found: (seed: UInt64, run: SimulationRun)?
        for seed: UInt64 in 1...seeds {
            let run = try await Simulator.run(seed: seed, steps: 200, plantedFault: fault)
            if run.violation != nil {
                found = (seed, run)
                break
            }
        }
        let (seed, run) = try #require(found, "the planted bug went unnoticed for \(seeds) seeds")
        if fault == .keepCoordinatorAfterClose { #expect(run.violation?.invariant == "1 coordinator ⇔ attached store") }
        let (commands, violation) = try await Shrinker.minimize(run, seed: seed, plantedFault: fault)
        #expect(commands.count <= longestScript, "\(commands.map(\.scriptLine))")
        #expect(commands.count < run.violation!.step)
        switch fault {
        case .missingInboxFsync, .missingDirectoryFsync:
            // A `device power-cut`, or one a fault plan makes inside an I/O call (`fault next-io power-cut`).
            let cutsPower = commands.contains {
                switch $0 {
                case .devicePowerCut: true
                case .faultNextIO(let fault): if case .powerCut = fault.kind { true } else { false }
                default: false
                }
            }
            #expect(cutsPower, "a missing fsync shows only at a power cut: \(commands.map(\.scriptLine))")
        case .mergeTruncatesUnread:
            #expect(commands.contains { if case .damage = $0 { true } else { false } }, "only damage makes a span the merge cannot read")
        case .wipeNotRolledForward:
            #expect(violation.invariant.hasPrefix("9 "))
            #expect(commands.contains { $0.isFault }, "only a fault stops an erase part-way")
        case .keepCoordinatorAfterClose:
            break
        }
        // The minimized commands break the invariant with the bug and hold without it.
        let withBug = try await Simulator.replay(commands, seed: seed, plantedFault: fault)
        #expect(withBug.violation != nil)
        let withoutBug = try await Simulator.replay(commands, seed: seed)
        #expect(withoutBug.violation == nil, "without the bug the commands hold")
        // As a script, when an `expect` line can state the invariant (a key file on disk cannot be expected).
        guard violation.expectation != nil else { return }
        let script = try ScenarioScript(name: "minimized", text: Shrinker.script(commands, violation: violation, seed: seed))

        let directory = TemporaryDirectory()
        let planted = try ScenarioSession(stateDirectory: directory.file("planted"), kdf: .minimal, output: { _ in })
        planted.plantedFault = fault
        #expect(await script.run(in: planted) != nil, "the script reproduces the violation")
        let clean = try ScenarioSession(stateDirectory: directory.file("clean"), kdf: .minimal, output: { _ in })
        #expect(await script.run(in: clean) == nil, "without the bug the script holds")
    }

    @Test("power cuts in every mode: acknowledged writes survive, stores pass integrity_check, nothing is lost")
    func powerCutsHold() async throws {
        var tally = PowerCutTally()
        var coverage = CoverageTally()
        var modes = Set<PowerCutMode>()
        for seed: UInt64 in 101...112 {
            let run = try await Simulator.run(seed: seed, steps: 200)
            #expect(run.violation == nil, "seed \(seed): \(run.violation.map(String.init(describing:)) ?? "")")
            tally += run.powerCuts
            coverage += run.coverage
            for case .devicePowerCut(let mode, _) in run.commands { modes.insert(mode) }
        }
        #expect(modes == Set(PowerCutMode.allCases), "the generator cuts in every mode")
        #expect(tally.cuts >= 12)
        #expect(tally.integrityChecks > 0 && tally.acknowledgedWritesChecked > 0, "\(tally.summary)")
        // Faults and cuts inside commands, and damage, held the same invariants.
        let faults = [coverage.faultsNoSpace, coverage.faultsIOError, coverage.faultsShortWrite, coverage.faultsPowerCut]
        #expect(faults.allSatisfy { $0 > 0 } && coverage.faultedCommandsFailed > 0, "\(coverage.summaryLines)")
        #expect(coverage.damagedRecords > 0 && coverage.intactRecordsAfterDamage > 0, "\(coverage.summaryLines)")
    }

    @Test("a merge's counts decide which failed appends were there: fewest first, the acknowledged always")
    func optionalRecordsAtAMerge() {
        func record(_ key: String, kind: String? = nil, optional: Bool = false) -> SimulationModel.PendingRecord {
            SimulationModel.PendingRecord(key: key, value: "v", kind: kind, otherProcessAt: nil, optional: optional)
        }
        let records = [record("a"), record("b", optional: true), record("c", kind: "sticker"), record("d")]
        #expect(SimulationModel.handledRecords(records, merged: 2, quarantined: 1) == [true, false, true, true])
        #expect(SimulationModel.handledRecords(records, merged: 3, quarantined: 1) == [true, true, true, true])
        #expect(SimulationModel.handledRecords(records, merged: 1, quarantined: 0) == [true])
        #expect(SimulationModel.handledRecords(records, merged: 4, quarantined: 1) == nil, "a record no append wrote")
        #expect(SimulationModel.handledRecords(records, merged: 1, quarantined: 1) == [true, false, true])
        #expect(SimulationModel.handledRecords(records, merged: 0, quarantined: 1) == nil, "a, acknowledged, comes first")
    }

    @Test("the plaintext check finds a value or SQLite's header in any file but hardware/, and rescans only changed files")
    func plaintextCheck() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        let session = try ScenarioSession(stateDirectory: state, kdf: .minimal, output: { _ in })
        let needles = ["val-7-"]
        #expect(session.plaintextFindings(of: needles, onlyChanged: true).isEmpty)
        // Past the first read's 64 KiB, so the buffer grows; the value at the very end.
        try (Data(repeating: 0xA5, count: 200_000) + Data("val-7-12".utf8)).write(to: URL(fileURLWithPath: state + "/leak.log"))
        #expect(session.plaintextFindings(of: needles, onlyChanged: true) == ["plaintext 'val-7-' in leak.log"])
        #expect(session.plaintextFindings(of: needles, onlyChanged: true).isEmpty, "unchanged since the last scan")
        #expect(session.plaintextFindings(of: needles) == ["plaintext 'val-7-' in leak.log"], "a full scan reads it again")
        try Data(repeating: 0xA5, count: 10).write(to: URL(fileURLWithPath: state + "/leak.log"))
        #expect(session.plaintextFindings(of: needles, onlyChanged: true).isEmpty, "rewritten without the value")
        try FileManager.default.createDirectory(atPath: state + "/device", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: state + "/hardware", withIntermediateDirectories: true)
        try Data("SQLite format 3\0".utf8).write(to: URL(fileURLWithPath: state + "/device/copy"))
        try Data("val-7-1".utf8).write(to: URL(fileURLWithPath: state + "/hardware/uid.key"))
        #expect(session.plaintextFindings(of: needles, onlyChanged: true) == ["plaintext 'SQLite format 3' in device/copy"])
    }

    @Test("every command renders as a script line that parses back to it")
    func scriptLinesRoundTrip() async throws {
        let run = try await Simulator.run(seed: 9, steps: 200)
        for command in run.commands {
            #expect(try ScenarioParser.parse(command.scriptLine) == command, "\(command.scriptLine)")
        }
        let odd = ScenarioCommand.put(key: "a key", value: "quote \" and # hash")
        #expect(try ScenarioParser.parse(odd.scriptLine) == odd)
        // Found by the FuzzScenarioLanguage fuzz target: a word that starts with a combining mark fused with
        // the space before it when the line was read by characters.
        let parsed = try #require(try ScenarioParser.parse("\u{0B}put\u{0B}\u{0309}\u{11}\u{0B}7"))
        #expect(parsed == .put(key: "\u{0309}\u{11}", value: "7"))
        #expect(try ScenarioParser.parse(parsed.scriptLine) == parsed)
        // Also found by it: a backslash followed by a combining mark (one Character) was not escaped, and the
        // words of `expect error …` were not quoted at all.
        for command in [ScenarioCommand.put(key: "k\\\u{0737}x", value: "v"), .expect(.error("two words\0"))] {
            #expect(try ScenarioParser.parse(command.scriptLine) == command, "\(command.scriptLine.debugDescription)")
        }
    }
}

/// The generator reaches every feature, and the oracle's rules for them say what the device and store do.
@MainActor
@Suite("Simulator coverage", .timeLimit(.minutes(10)))
struct SimulatorCoverageTests {
    @Test("the generator covers the whole product: passcode changes and delays, wipes, the quarantine, reads, another process's appends, 4 MiB values")
    func generatorCoversTheProduct() async throws {
        var coverage = CoverageTally()
        // Seeds 1–20 hold a wipe (seeds decide it, one in eight), and values at the 4 MiB limit.
        for seed: UInt64 in 1...20 {
            let run = try await Simulator.run(seed: seed, steps: 200)
            #expect(run.violation == nil, "seed \(seed): \(run.violation.map(String.init(describing:)) ?? "")")
            coverage += run.coverage
        }
        #expect(coverage.passcodeChanges > 0 && coverage.passcodeChangesRefused > 0 && coverage.wrongUnlocks > 0)
        #expect(coverage.passcodeDelays > 0, "some seed guesses until a delay")
        #expect(coverage.wipes > 0 && coverage.stepsAfterWipe > 0, "some seed's device erases itself")
        #expect(coverage.unknownKindRecords > 0 && coverage.quarantined > 0)
        #expect(coverage.retries > 0 && coverage.discards > 0 && coverage.discardedRecords > 0)
        #expect(coverage.otherProcessAppends > 0 && coverage.readsChecked > 0)
        #expect(coverage.largeInboxAppends + coverage.largePuts > 0, "\(coverage.summaryLines)")
        #expect(coverage.summaryLines.allSatisfy { $0.count <= 100 }, "\(coverage.summaryLines)")
    }

    @Test("the model counts a wrong old passcode as a failed attempt, delays from the fifth, and a wipe is final")
    func modelOfPasscodeAttempts() {
        var model = SimulationModel(gracePeriod: .seconds(10))
        #expect(model.apply(.deviceSetup(passcode: "1234", grace: .seconds(10), wipeAfter: nil)) == nil)
        for _ in 1...4 { #expect(model.apply(.deviceChangePasscode(old: "0000", new: "5678")) == "wrong-passcode") }
        #expect(model.apply(.deviceLock) == nil)
        #expect(model.apply(.deviceUnlock(passcode: "0000")) == "wrong-passcode")
        #expect(model.apply(.deviceUnlock(passcode: "1234")) == "passcode-delay", "a minute after the fifth failure")
        #expect(model.apply(.deviceChangePasscode(old: "1234", new: "5678")) == "passcode-delay")
        _ = model.apply(.clockAdvance(.seconds(60)))
        #expect(model.apply(.deviceReboot) == nil)
        #expect(model.apply(.deviceUnlock(passcode: "1234")) == "passcode-delay", "a reboot restarts the delay")
        _ = model.apply(.clockAdvance(.seconds(60)))
        #expect(model.apply(.deviceChangePasscode(old: "1234", new: "5678")) == nil)
        #expect(model.failures == 0)
        #expect(model.apply(.deviceUnlock(passcode: "1234")) == "wrong-passcode", "the old passcode no longer opens")
        #expect(model.apply(.deviceUnlock(passcode: "5678")) == nil)

        var wiping = SimulationModel(gracePeriod: .seconds(10))
        _ = wiping.apply(.deviceSetup(passcode: "1234", grace: .seconds(10), wipeAfter: 3))
        #expect(wiping.apply(.deviceChangePasscode(old: "0000", new: "1")) == "wrong-passcode")
        #expect(wiping.apply(.deviceChangePasscode(old: "0000", new: "1")) == "wrong-passcode")
        #expect(wiping.apply(.deviceChangePasscode(old: "0000", new: "1")) == "device-wiped", "the third failure erases, unlocked or not")
        #expect(wiping.deviceWord == "wiped")
        #expect(ProtectionClass.allCases.allSatisfy { !wiping.keysHeld($0) })
        #expect(wiping.apply(.deviceReboot) == nil)
        #expect(wiping.apply(.deviceUnlock(passcode: "1234")) == "device-wiped")
        #expect(wiping.apply(.deviceChangePasscode(old: "1234", new: "1")) == "device-wiped")
        #expect(wiping.deviceWord == "wiped")
    }

    @Test("the model moves unknown kinds to the quarantine at a merge and flags a merge, a retry or a read that disagrees")
    func modelOfTheInbox() {
        var model = SimulationModel(gracePeriod: .seconds(10))
        _ = model.apply(.deviceSetup(passcode: "1234", grace: .seconds(10), wipeAfter: nil))
        model.storeAttachedOnce = true
        #expect(model.apply(.inboxPut(key: "a", value: "1")) == nil)
        #expect(model.apply(.inboxPut(key: "b", value: "2", kind: "sticker")) == nil)
        #expect(model.apply(.inboxPut(key: "c", value: "3", otherProcess: true)) == nil)
        let fits = InboxRecord.maximumPayloadLength - SimulationModel.inboxPayloadLength(key: "d", value: "", kind: "sticker")
        #expect(model.apply(.inboxPut(key: "d", value: ScenarioValue.filled(fits), kind: "sticker")) == nil)
        #expect(model.apply(.inboxPut(key: "d", value: ScenarioValue.filled(fits + 1), kind: "sticker")) == "inbox-record-too-large")
        #expect(model.inboxRecordsAReadyStoreMayHold == 0, "records of this process are merged at once")
        model.absorb([.inboxMerged(2, quarantined: 2)])
        #expect(model.finding == nil)
        #expect(model.contents == ["a": "1", "c": "3"] && model.quarantine == ["sticker", "sticker"])
        model.absorb([.quarantineRetried(merged: 0, stillQuarantined: 2), .read(key: "a", value: "1"), .read(key: "b", value: nil)])
        #expect(model.finding == nil)

        _ = model.apply(.inboxPut(key: "e", value: "5", otherProcess: true))
        #expect(model.inboxRecordsAReadyStoreMayHold == 1, "another process's record waits for the poll")
        _ = model.apply(.clockAdvance(SimulationModel.inboxPollInterval))
        #expect(model.inboxRecordsAReadyStoreMayHold == 0)

        var dropped = model
        dropped.absorb([.inboxMerged(1, quarantined: 0)])
        #expect(dropped.finding == nil)
        dropped.absorb([.quarantineDiscarded(which: nil, removed: 1)])
        #expect(dropped.finding?.invariant == "7 inbox records merged or quarantined", "discard all removed one of two")
        var retried = model
        retried.absorb([.quarantineRetried(merged: 0, stillQuarantined: 1)])
        #expect(retried.finding?.invariant == "7 inbox records merged or quarantined", "a retry lost one")
        var misread = model
        misread.absorb([.read(key: "a", value: "stale")])
        #expect(misread.finding?.invariant == "4 acknowledged writes readable")
        var miscounted = model
        miscounted.absorb([.inboxMerged(0, quarantined: 1)])
        #expect(miscounted.finding?.invariant == "7 inbox records merged or quarantined", "a put reported as quarantined")
    }

    @Test("after a wipe, a keybag or device key that exists again is a violation of invariant 9")
    func wipeCheckFindsAKeyBack() async throws {
        let directory = TemporaryDirectory()
        let session = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal, output: { _ in })
        var model = SimulationModel(gracePeriod: .seconds(10))
        for command in [ScenarioCommand.deviceSetup(passcode: "1234", grace: .seconds(10), wipeAfter: 1), .deviceLock, .deviceUnlock(passcode: "0")] {
            _ = model.apply(command)
            await session.execute(command)
        }
        #expect(session.lastError?.code.name == "device-wiped" && model.wiped)
        #expect(Simulator.checkWipe(session: session, model: model) == nil)
        try Data(repeating: 7, count: 32).write(to: URL(fileURLWithPath: session.stateDirectory + "/hardware/uid.key"))
        #expect(Simulator.checkWipe(session: session, model: model)?.invariant == "9 never brings an erased key back")
    }

    @Test("a device erased while the app runs closes its class-C store: the oracle's wipe rule holds (found by the simulator, issue 26)")
    func wipeWithTheAppRunning() async throws {
        let commands: [ScenarioCommand] = [
            .deviceSetup(passcode: "1234", grace: .seconds(10), wipeAfter: 3),
            .appLaunch(LaunchOptions(reason: .user), protection: .completeUntilFirstUserAuthentication, attachDelay: .zero),
            .put(key: "k", value: "v"), .deviceLock, .clockAdvance(.seconds(60)),
            .deviceUnlock(passcode: "0"), .deviceUnlock(passcode: "0"), .deviceUnlock(passcode: "0"),
        ]
        let run = try await Simulator.replay(commands, seed: 1)
        #expect(run.violation == nil, "\(run.violation.map(String.init(describing:)) ?? "")")
    }
}
