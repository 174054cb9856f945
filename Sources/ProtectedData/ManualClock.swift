import SecureKeys

/// A clock that moves only when told to, at once: ``advance(by:)`` is synchronous.
///
/// For simulations that drive time themselves (the scenario session, which the shell, scenario scripts and
/// the simulator run on): a device and a controller built with `schedulesTimers: false` never sleep on it,
/// they look at ``now`` when told the clock moved. swift-clocks' `TestClock` does the same job for code that sleeps, but every advance yields to the
/// scheduler dozens of times (detached tasks, each a thread hand-off) so that sleepers can run — in the
/// simulator that was most of a step's cost, and none of it was needed.
///
/// Sleeping works all the same: a sleeper is resumed by the advance that reaches its deadline (and finds the
/// clock at its new time), or with `CancellationError` when its task is cancelled.
public final class ManualClock: Clock, Sendable {
    /// A point on the manual clock: the time since it started.
    public struct Instant: InstantProtocol, Sendable {
        /// Time since the clock started.
        public let offset: Duration

        public init(offset: Duration = .zero) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant()
        var nextSleeper = 0
        var sleepers: [Int: Sleeper] = [:]
    }

    private let state = LockedState(State())

    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// How many sleeps wait for the clock to reach their deadline.
    public var pendingSleepers: Int { state.withLock { $0.sleepers.count } }

    /// Moves the clock forward by `duration` and resumes every sleeper whose deadline it reached.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a clock does not go back: advance(by: \(duration))")
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers[id] = nil }
            return Array(due.values)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state -> Int in
            state.nextSleeper += 1
            return state.nextSleeper
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let isDue = state.withLock { state -> Bool in
                    if deadline <= state.now { return true }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return false
                }
                if isDue { return continuation.resume() }
                // A cancellation that came before the sleeper was registered found nothing to cancel.
                if Task.isCancelled { cancelSleeper(id) }
            }
        } onCancel: {
            cancelSleeper(id)
        }
    }

    /// Ends a sleep with `CancellationError`, unless an advance or an earlier cancellation ended it.
    private func cancelSleeper(_ id: Int) {
        let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
        sleeper?.continuation.resume(throwing: CancellationError())
    }
}
