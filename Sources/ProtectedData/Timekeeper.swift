import SecureKeys

/// Work waiting for a deadline on a clock.
///
/// It is cancelled explicitly; releasing it does not cancel it.
package final class ScheduledWork: Sendable {
    private let cancellation: @Sendable () -> Void

    init(cancel: @escaping @Sendable () -> Void) { cancellation = cancel }

    /// Stops the work from running, if it has not run yet. Cancelling twice is harmless.
    package func cancel() { cancellation() }
}

/// The one clock a device or a data controller was given, read as time since it was handed over, with
/// timers on it.
///
/// On a ``ManualClock`` a timer runs inside the `advance` that reaches it; on any other clock (a
/// `ContinuousClock` in an app, swift-clocks' `TestClock` in someone's tests) a task sleeps until the deadline
/// and runs the work then. Either way the owner never has to be told that time moved.
package struct Timekeeper: Sendable {
    /// A point in time, as how long after the timekeeper was made.
    package typealias Instant = Duration

    private let elapsed: @Sendable () -> Duration
    private let scheduler: @Sendable (Duration, @escaping @Sendable () -> Void) -> ScheduledWork

    /// Keeps time with `clock`, starting now.
    package init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let origin = clock.now
        elapsed = { origin.duration(to: clock.now) }
        if let manual = clock as? ManualClock {
            let manualOrigin = manual.now
            scheduler = { offset, work in manual.schedule(at: manualOrigin.advanced(by: offset), work) }
        } else {
            scheduler = { offset, work in
                let task = Task {
                    try await clock.sleep(until: origin.advanced(by: offset), tolerance: nil)
                    work()
                }
                return ScheduledWork { task.cancel() }
            }
        }
    }

    /// The time since the timekeeper was made.
    package var now: Instant { elapsed() }

    /// Runs `work` once the clock reaches `deadline` (at once, or on the next turn, if it has passed).
    ///
    /// - Returns: what cancels it.
    @discardableResult
    package func schedule(at deadline: Instant, _ work: @escaping @Sendable () -> Void) -> ScheduledWork {
        scheduler(deadline, work)
    }
}
