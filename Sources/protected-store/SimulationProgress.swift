import Foundation
import Glibc

/// The line `simulate` keeps up to date on standard error while it runs at a terminal.
///
/// It shows seeds done, steps per second, violations so far and the time left. A run of 2,000 seeds takes minutes;
/// without it, nothing shows that it is working.
///
/// Nothing is written when standard error is not a terminal (a log, a pipe, CI), and no colour when `NO_COLOR`
/// is set (https://no-color.org) or the terminal is `dumb`.
struct SimulationProgress {
    /// How many seeds the run has.
    let total: Int
    /// Whether the violation count is coloured.
    let colored: Bool
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant

    /// - Parameters:
    ///   - total: how many seeds the run has.
    ///   - wanted: `false` for `--no-progress`.
    ///   - environment: the process's environment, for `NO_COLOR` and `TERM`.
    /// - Returns: `nil` when no progress is to be shown.
    init?(total: Int, wanted: Bool, environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard wanted, isatty(STDERR_FILENO) == 1 else { return nil }
        self.total = total
        colored = (environment["NO_COLOR"] ?? "").isEmpty && environment["TERM"] != "dumb"
        started = clock.now
    }

    /// Rewrites the line after a seed finished.
    ///
    /// - Parameters:
    ///   - seedsDone: seeds finished so far.
    ///   - steps: commands run so far, over every seed.
    ///   - violations: invariants found broken so far.
    func update(seedsDone: Int, steps: Int, violations: Int) {
        let elapsed = Self.seconds(started.duration(to: clock.now))
        let speed = Int(Double(steps) / max(elapsed, 0.001))
        let left = elapsed / Double(max(seedsDone, 1)) * Double(total - seedsDone)
        var count = "\(violations) violation\(violations == 1 ? "" : "s")"
        if colored { count = (violations == 0 ? "\u{1B}[32m" : "\u{1B}[31m") + count + "\u{1B}[0m" }
        let line = "seed \(seedsDone) of \(total) done · \(steps) steps · \(speed) steps/s · \(count) · about \(Self.duration(left)) left"
        write("\r" + line + "\u{1B}[K")
    }

    /// Erases the line, before the run's result is printed.
    func clear() {
        write("\r\u{1B}[K")
    }

    private func write(_ text: String) {
        StandardError.writeText(text)
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// `45s`, `3m 05s`, `1h 20m`.
    static func duration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded(.up))
        if whole < 60 { return "\(whole)s" }
        if whole < 3600 { return "\(whole / 60)m " + String(format: "%02ds", whole % 60) }
        return "\(whole / 3600)h " + String(format: "%02dm", whole % 3600 / 60)
    }
}
