import DiskModel
import ArgumentParser
import Foundation
import ProtectedStore
import ProtectedStoreHarness

extension ProtectedStoreCommand {
    /// Seeded random runs on the real stack, with the design's invariants (README.md, "The design in one page") checked after every step.
    struct Simulate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run seeded random command sequences on the real stack and check the invariants after every step.",
            discussion: """
                The same seed gives the same run. On a violation: exit 1, print the seed and a minimized script \
                that `protected-store run` fails on the same way, and write it into the --output folder (if it \
                cannot be written, the reason is on standard error and the script is still printed). At a \
                terminal, a progress line on standard error shows seeds done, steps/s, violations and the time \
                left (no colour with NO_COLOR set; none with --no-progress). Ctrl-C or SIGTERM removes the \
                temporary state directories (they hold key files) and exits 130 or 143.
                """)

        @Option(parsing: .unconditional, help: "How many seeds to run (1 or more).", transform: WholeNumberOption.transform(1...Int.max))
        var seeds = 100

        @Option(parsing: .unconditional, help: "The first seed.", transform: WholeNumberOption.transform(UInt64.min...UInt64.max))
        var start: UInt64 = 1

        @Option(parsing: .unconditional, help: "Commands per seed (1 or more).", transform: WholeNumberOption.transform(1...Int.max))
        var steps = 200

        @Option(name: .customLong("output"), help: "Where to write the minimized script of a violation.")
        var outputDirectory = "."

        @Flag(help: "Print every step of every seed.")
        var trace = false

        @Flag(
            name: .customLong("progress"), inversion: .prefixedNo,
            help: "At a terminal, keep a progress line on standard error (never when it is not a terminal).")
        var progress = true

        @OptionGroup var logging: LoggingOptions

        @Option(help: "Plant a bug in the app, to see the simulator catch it (its self-test; `run --plant` replays it).")
        var plant: PlantedFault?

        func validate() throws {
            if seeds < 1 { throw ValidationError("--seeds must be at least 1, got \(seeds)") }
            if steps < 1 { throw ValidationError("--steps must be at least 1, got \(steps)") }
            if start.addingReportingOverflow(UInt64(seeds - 1)).overflow {
                throw ValidationError("--start \(start) with --seeds \(seeds) runs past the last seed, \(UInt64.max)")
            }
            if seeds.multipliedReportingOverflow(by: steps).overflow {
                throw ValidationError("--seeds \(seeds) × --steps \(steps) is more steps than can be counted (at most \(Int.max))")
            }
            if outputDirectory.isEmpty { throw ValidationError("--output needs a folder (`.` for the current one)") }
        }

        @MainActor
        func run() async throws {
            logging.bootstrap()
            try await SignalCleanup.run { try await work() }
        }

        /// The command itself, inside the signal clean-up's watch.
        @MainActor
        private func work() async throws {
            let clock = ContinuousClock()
            let started = clock.now
            let progress = SimulationProgress(total: seeds, wanted: self.progress)
            var totalSteps = 0
            var powerCuts = PowerCutTally()
            var coverage = CoverageTally()
            for (done, seed) in (start...(start + UInt64(seeds - 1))).enumerated() {
                // Commands and trace are kept only to be printed: a long seed's memory stays bounded,
                // and the shrinker draws a violation's commands again from its seed.
                let run = try await Simulator.run(seed: seed, steps: steps, plantedFault: plant, recording: trace)
                totalSteps += run.steps
                powerCuts += run.powerCuts
                coverage += run.coverage
                if trace {
                    progress?.clear()
                    for line in run.trace { print("seed \(seed) \(line)") }
                }
                guard let violation = run.violation else {
                    progress?.update(seedsDone: done + 1, steps: totalSteps, violations: 0)
                    continue
                }
                progress?.update(seedsDone: done + 1, steps: totalSteps, violations: 1)
                progress?.clear()
                print("seed \(seed): violation at \(violation)")
                let (commands, minimized) = try await Shrinker.minimize(run, seed: seed, plantedFault: plant)
                let script = Shrinker.script(commands, violation: minimized, seed: seed)
                let path = outputDirectory + "/simulate-seed-\(seed).scenario"
                do {
                    try TextFile.write(script, to: path)
                    print("minimized from \(violation.step) to \(commands.count) commands: \(path)")
                    print(script, terminator: "")
                } catch {
                    print("minimized from \(violation.step) to \(commands.count) commands (not saved: see standard error):")
                    print(script, terminator: "")
                    StandardError.write("simulate: could not write the minimized script to \(error); it is printed above")
                }
                throw ExitCode(1)
            }
            progress?.clear()
            let elapsed = started.duration(to: clock.now)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            // The summary first (scripts and tests read it), then what the runs covered.
            print("\(seeds) seeds, \(totalSteps) steps, 0 violations (\(Int(Double(totalSteps) / max(seconds, 0.001))) steps/s, \(String(format: "%.1f", seconds)) s)")
            // Wrapped to the terminal (or COLUMNS); whole lines into a pipe or a file, for scripts that read them.
            let width = OutputWidth.current()
            if powerCuts.cuts > 0 { OutputWidth.print(powerCuts.summary, width: width) }
            for line in coverage.summaryLines { OutputWidth.print(line, width: width) }
        }
    }
}

extension PlantedFault: ExpressibleByArgument {}
