import Foundation
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

    typealias Peak = (allocations: Int, mappings: Int)

    /// Runs seed 1 for ``steps`` steps and returns the most guarded allocations and mappings the process held
    /// during the warm-up and after it; exits 2 when the run itself fails.
    @MainActor
    static func peaks() async throws -> (early: Peak, late: Peak) {
        var early: Peak = (0, 0)
        var late: Peak = (0, 0)
        let run = try await Simulator.run(seed: 1, steps: steps) { step in
            let now = (SecureBytes.liveAllocationCount, mappingCount())
            if step <= warmUp {
                early = (max(early.allocations, now.0), max(early.mappings, now.1))
            } else {
                late = (max(late.allocations, now.0), max(late.mappings, now.1))
            }
        }
        guard run.violation == nil, run.commands.count == steps else { exit(2) }
        return (early, late)
    }

    /// The lines of /proc/self/maps: one per mapping.
    static func mappingCount() -> Int {
        guard let maps = try? String(contentsOfFile: "/proc/self/maps", encoding: .utf8) else { return -1 }
        return maps.split(separator: "\n").count
    }
}
