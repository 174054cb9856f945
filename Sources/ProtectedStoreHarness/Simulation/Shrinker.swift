package import DiskModel
import ProtectedStore
import ProtectedData

/// Shrinks a failing command sequence while it still breaks the same invariant, and writes it as a script
/// that `protected-store run` fails on.
@MainActor
public enum Shrinker {
    /// The smallest sequence found (removing chunks, then single commands, while the violation stays).
    ///
    /// A run that did not record its commands (a long seed) has them drawn again from `seed`, up to the
    /// violation's step: the same seed gives the same commands.
    package static func minimize(
        _ run: SimulationRun, seed: UInt64, plantedFault: PlantedFault? = nil
    ) async throws -> (commands: [ScenarioCommand], violation: Violation) {
        guard var violation = run.violation else { return (run.commands, Violation(step: 0, invariant: "", message: "", expectation: nil)) }
        var recorded = run.commands
        if recorded.count < violation.step {
            recorded = try await Simulator.run(seed: seed, steps: violation.step, plantedFault: plantedFault, recording: true).commands
        }
        var commands = Array(recorded.prefix(violation.step))
        var chunk = max(1, commands.count / 2)
        while true {
            var index = 0
            while index < commands.count {
                var candidate = commands
                candidate.removeSubrange(index..<min(index + chunk, candidate.count))
                let replayed = try await Simulator.replay(candidate, seed: seed, plantedFault: plantedFault)
                // The same invariant; for a command's outcome, the same outcome too (an error of another kind is
                // another finding: a command left without what it needs, say).
                if let found = replayed.violation, found.invariant == violation.invariant,
                    found.invariant != Self.commandOutcome || found.message == violation.message
                {
                    commands = Array(candidate.prefix(found.step))
                    violation = found
                } else {
                    index += chunk
                }
            }
            if chunk == 1 { break }
            chunk = max(1, chunk / 2)
        }
        return (commands, violation)
    }

    /// The oracle's invariant for a command's error.
    static let commandOutcome = "oracle: command outcome"

    /// The script of the commands, then the `expect` that fails the way the invariant did.
    public static func script(_ commands: [ScenarioCommand], violation: Violation, seed: UInt64) -> String {
        var lines = [
            "# Minimized by `protected-store simulate` from seed \(seed).",
            "# \(violation.invariant): \(violation.message)",
        ]
        lines += commands.map(\.scriptLine)
        if let expectation = violation.expectation {
            lines.append(ScenarioCommand.expect(expectation).scriptLine)
        } else {
            lines.append("# (no expect line can state this invariant; the simulator checks it after the last command)")
        }
        return lines.joined(separator: "\n") + "\n"
    }
}
