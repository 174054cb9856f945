import Foundation
import Synchronization

/// A step of the story that did not behave as expected: the message says what was expected and what
/// happened. The program prints it and exits 1.
struct StoryFailure: Error, CustomStringConvertible {
    /// What was expected, and what happened.
    var description: String

    /// A failure.
    ///
    /// - Parameter description: what was expected, and what happened.
    init(_ description: String) { self.description = description }
}

/// Throws a ``StoryFailure`` with `message` unless `condition` holds.
///
/// - Parameters:
///   - condition: what the step expects.
///   - message: what was expected and what happened instead.
func check(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw StoryFailure(message()) }
}

/// Ends the program with a clear message if a step waits for something that never comes — a value the
/// observation never delivers, a phase that never arrives — instead of hanging CI. A guard against hangs,
/// not a speed target: the whole story takes a few seconds.
enum Watchdog {
    private static let step = Mutex("starting")

    /// How long one step may take before the program gives up.
    static let limit: Duration = .seconds(60)

    /// Starts timing `name`.
    ///
    /// - Parameter name: the step, as the failure names it.
    static func begin(_ name: String) {
        step.withLock { $0 = name }
        Task.detached {
            try? await Task.sleep(for: limit)
            if step.withLock({ $0 == name }) {
                FileHandle.standardError.write(Data("notes: FAILED: step \"\(name)\" did not finish within \(limit)\n".utf8))
                exit(1)
            }
        }
    }

    /// Stops timing.
    static func end() { step.withLock { $0 = "finished" } }

    /// The step being told.
    static var currentStep: String { step.withLock { $0 } }
}

extension Int {
    /// `5,003`: digits grouped by thousands, whatever the locale.
    var spelled: String {
        let digits = String(magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { grouped.append(",") }
            grouped.append(digit)
        }
        return (self < 0 ? "-" : "") + grouped
    }
}

extension Duration {
    /// `12.3 ms`.
    var milliseconds: String {
        let (seconds, attoseconds) = components
        return String(format: "%.1f ms", Double(seconds) * 1000 + Double(attoseconds) / 1e15)
    }
}
