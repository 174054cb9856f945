import ArgumentParser
import Foundation
import ProtectedStore
import ProtectedStoreHarness

extension ProtectedStoreCommand {
    /// Seeded random runs on the real stack, with DESIGN.md's invariants checked after every step.
    struct Simulate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run seeded random command sequences on the real stack and check the invariants after every step.",
            discussion: """
                The same seed gives the same run. On a violation: exit 1, print the seed, and write a minimized \
                script that `protected-store run` fails on the same way.
                """)

        @Option(help: "How many seeds to run.")
        var seeds = 100

        @Option(help: "The first seed.")
        var start: UInt64 = 1

        @Option(help: "Commands per seed.")
        var steps = 200

        @Option(name: .customLong("output"), help: "Where to write the minimized script of a violation.")
        var outputDirectory = "."

        @Flag(help: "Print every step of every seed.")
        var trace = false

        @OptionGroup var logging: LoggingOptions

        @Option(help: ArgumentHelp("Plant a bug, to see the simulator catch it.", visibility: .hidden))
        var plant: DataController.PlantedFault?

        func validate() throws {
            if seeds < 1 { throw ValidationError("--seeds must be at least 1") }
            if steps < 1 { throw ValidationError("--steps must be at least 1") }
            if start.addingReportingOverflow(UInt64(seeds - 1)).overflow {
                throw ValidationError("--start \(start) with --seeds \(seeds) runs past the last seed, \(UInt64.max)")
            }
        }

        @MainActor
        func run() async throws {
            logging.bootstrap()
            let clock = ContinuousClock()
            let started = clock.now
            var totalSteps = 0
            for seed in start...(start + UInt64(seeds - 1)) {
                let run = try await Simulator.run(seed: seed, steps: steps, plantedFault: plant)
                totalSteps += run.commands.count
                if trace { for line in run.trace { print("seed \(seed) \(line)") } }
                guard let violation = run.violation else { continue }
                print("seed \(seed): violation at \(violation)")
                let (commands, minimized) = try await Shrinker.minimize(run, seed: seed, plantedFault: plant)
                let script = Shrinker.script(commands, violation: minimized, seed: seed)
                let path = outputDirectory + "/simulate-seed-\(seed).scenario"
                try script.write(toFile: path, atomically: true, encoding: .utf8)
                print("minimized from \(violation.step) to \(commands.count) commands: \(path)")
                print(script, terminator: "")
                throw ExitCode(1)
            }
            let elapsed = started.duration(to: clock.now)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("\(seeds) seeds, \(totalSteps) steps, 0 violations (\(Int(Double(totalSteps) / max(seconds, 0.001))) steps/s, \(String(format: "%.1f", seconds)) s)")
        }
    }
}

extension DataController.PlantedFault: ExpressibleByArgument {}
