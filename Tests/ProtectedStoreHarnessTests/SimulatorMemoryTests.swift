import DiskModel
import Foundation
import ProtectedStore
import SecureKeys
import Testing

@testable import ProtectedStoreHarness

/// What a long seed holds: bounded, whatever its length (issue 30: a seed of 10¹¹ steps grew to 3.4 GB and
/// 65,260 memory mappings, then died allocating a key, leaving its key files behind). Measured by count — the
/// guarded allocations (`sodium_malloc`: a key each, with its guard pages) and the process's memory mappings —
/// never by time.
@Suite("Simulator memory")
struct SimulatorMemoryTests {
    /// Steps sampled; the first `warmUp` set the device up and start the apps a seed keeps.
    static let steps = 1_200
    static let warmUp = 300

    @Test("a long seed holds no more guarded allocations or memory mappings at its end than early on: crashed apps' keys, connections and threads are freed")
    func longSeedStaysBounded() async {
        // In a process of its own: both counts are the whole process's, and the tests beside this one hold keys
        // and threads of their own.
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let (early, late) = try await SimulatorMemoryTests.peaks()
            FileHandle.standardError.write(Data((
                "guarded allocations: at most \(early.allocations) up to step \(SimulatorMemoryTests.warmUp), \(late.allocations) after; "
                    + "memory mappings: \(early.mappings), then \(late.mappings)\n").utf8))
            // Each crash, reboot and power cut of seed 1 (about one in 40 steps) kept the killed app's store key,
            // inbox key and threads: about 25 more allocations and 100 more mappings by the end.
            if late.allocations > early.allocations + 2 || late.mappings > early.mappings + 40 { exit(1) }
        }
        // Shown with the test's result: the numbers behind a pass or a failure.
        print(String(decoding: result?.standardErrorContent ?? [], as: UTF8.self), terminator: "")
    }

    @Test("a long seed run without recording keeps no command, trace line or written value, and at most a few journal entries, `ui` names and submissions not yet checked, after 1,200 steps")
    @MainActor
    func longSeedRecordsStayBounded() async throws {
        var largest = RetainedRecords(commands: 0, trace: 0, journal: 0, ran: 0, submitted: 0, writtenValues: 0)
        let run = try await Simulator.run(seed: 1, steps: Self.steps, recording: false) { step, kept in
            guard step > Self.warmUp else { return }
            largest = RetainedRecords(
                commands: max(largest.commands, kept.commands), trace: max(largest.trace, kept.trace),
                journal: max(largest.journal, kept.journal), ran: max(largest.ran, kept.ran),
                submitted: max(largest.submitted, kept.submitted), writtenValues: max(largest.writtenValues, kept.writtenValues),
                journaled: kept.journaled)
        }
        let journaled = largest.journaled
        print("after step \(Self.warmUp): at most \(largest) kept")
        #expect(run.violation == nil)
        #expect(run.steps == Self.steps)
        #expect(run.commands.isEmpty && run.trace.isEmpty)
        // Before issue 30 each of these grew with every step: seed 1 journals a few hundred entries in 1,200 steps.
        #expect(journaled > 200)
        #expect(largest.commands == 0 && largest.trace == 0 && largest.writtenValues == 0)
        #expect(largest.journal <= 16)
        #expect(largest.ran <= 16)
        #expect(largest.submitted <= 64)
    }

    @Test("a run that kept no commands finds the same violation, and is shrunk to the same script, as one that kept them")
    @MainActor
    func unrecordedRunShrinksTheSame() async throws {
        let fault = PlantedFault.keepCoordinatorAfterClose
        var found: (seed: UInt64, run: SimulationRun)?
        for seed: UInt64 in 1...40 {
            let run = try await Simulator.run(seed: seed, steps: 200, plantedFault: fault, recording: false)
            if run.violation != nil {
                found = (seed, run)
                break
            }
        }
        let (seed, unrecorded) = try #require(found, "the planted bug went unnoticed for 40 seeds")
        #expect(unrecorded.commands.isEmpty)
        let recorded = try await Simulator.run(seed: seed, steps: 200, plantedFault: fault)
        #expect(recorded.violation.map(String.init(describing:)) == unrecorded.violation.map(String.init(describing:)))
        #expect(recorded.steps == unrecorded.steps)
        let fromRecorded = try await Shrinker.minimize(recorded, seed: seed, plantedFault: fault)
        let fromUnrecorded = try await Shrinker.minimize(unrecorded, seed: seed, plantedFault: fault)
        #expect(fromUnrecorded.commands.map(\.scriptLine) == fromRecorded.commands.map(\.scriptLine))
        #expect(fromUnrecorded.violation.description == fromRecorded.violation.description)
        #expect(fromUnrecorded.commands.count < unrecorded.steps)
    }

    typealias Peak = (allocations: Int, mappings: Int)

    /// Runs seed 1 for ``steps`` steps and returns the most guarded allocations and mappings the process held
    /// during the warm-up and after it; exits 2 when the run itself fails.
    @MainActor
    static func peaks() async throws -> (early: Peak, late: Peak) {
        var early: Peak = (0, 0)
        var late: Peak = (0, 0)
        let run = try await Simulator.run(seed: 1, steps: steps, recording: false) { step, _ in
            let now = (SecureBytes.liveAllocationCount, mappingCount())
            if step <= warmUp {
                early = (max(early.allocations, now.0), max(early.mappings, now.1))
            } else {
                late = (max(late.allocations, now.0), max(late.mappings, now.1))
            }
        }
        guard run.violation == nil, run.steps == steps else { exit(2) }
        return (early, late)
    }

    /// The lines of /proc/self/maps: one per mapping.
    static func mappingCount() -> Int {
        guard let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8) else { return -1 }
        return maps.split(separator: "\n").count
    }
}
