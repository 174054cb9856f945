import TestSupport
import Foundation
import ProtectedStore
import Testing

@testable import ProtectedStoreHarness

@MainActor
@Suite("Simulator", .timeLimit(.minutes(3)))
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

    @Test(
        "a planted bug is found, minimized, and the script fails with the bug and holds without it",
        arguments: [
            (DataController.PlantedFault.keepCoordinatorAfterClose, 5),
            (.missingInboxFsync, 6),
            (.missingDirectoryFsync, 6),
        ])
    func findsPlantedBug(fault: DataController.PlantedFault, longestScript: Int) async throws {
        var found: (seed: UInt64, run: SimulationRun)?
        for seed: UInt64 in 1...40 {
            let run = try await Simulator.run(seed: seed, steps: 200, plantedFault: fault)
            if run.violation != nil {
                found = (seed, run)
                break
            }
        }
        let (seed, run) = try #require(found, "the planted bug went unnoticed for 40 seeds")
        if fault == .keepCoordinatorAfterClose { #expect(run.violation?.invariant == "1 coordinator ⇔ attached store") }
        let (commands, violation) = try await Shrinker.minimize(run, seed: seed, plantedFault: fault)
        #expect(commands.count <= longestScript, "\(commands.map(\.scriptLine))")
        #expect(commands.count < run.violation!.step)
        if fault != .keepCoordinatorAfterClose {
            #expect(commands.contains { if case .devicePowerCut = $0 { true } else { false } }, "a missing fsync shows only at a power cut")
        }
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
        var modes = Set<PowerCutMode>()
        for seed: UInt64 in 101...112 {
            let run = try await Simulator.run(seed: seed, steps: 200)
            #expect(run.violation == nil, "seed \(seed): \(run.violation.map(String.init(describing:)) ?? "")")
            tally += run.powerCuts
            for case .devicePowerCut(let mode, _) in run.commands { modes.insert(mode) }
        }
        #expect(modes == Set(PowerCutMode.allCases), "the generator cuts in every mode")
        #expect(tally.cuts >= 12)
        #expect(tally.integrityChecks > 0 && tally.acknowledgedWritesChecked > 0, "\(tally.summary)")
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
