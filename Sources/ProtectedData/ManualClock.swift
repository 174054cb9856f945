import SecureKeys
import StoreConcurrency

/// The test clock, which moves only when told to.
///
/// ``advance(by:)`` runs the work that became due before it returns.
///
/// The device's grace period and the data controller's deadlines (an operation that may wait 30 s, a delayed
/// attach) are *timers* on the clock they were given. On a `ContinuousClock` a timer is a task that sleeps;
/// on a manual clock it is a callback that ``advance(by:)`` runs, in deadline order, with ``now`` set to that
/// deadline while it runs — the way swift-nio's `EmbeddedEventLoop` runs scheduled tasks when its time is
/// advanced. So a test moves the clock and the due work has happened: nobody tells the device or the
/// controller that time moved.
///
/// Sleeping works too: a task that sleeps on the clock is resumed by the advance that reaches its deadline (it
/// then runs on its own executor), or with `CancellationError` when its task is cancelled.
///
/// It is the one test clock of the project (the scenario session, the simulator, the demo and
/// `ProtectedStoreTestEnvironment` use it). swift-clocks' `TestClock` still works with a device or a controller,
/// through the sleeping path, but each of its advances yields to the scheduler dozens of times so that
/// sleepers can run — in the simulator that was most of a step's cost.
public final class ManualClock: Clock, Sendable {
    /// A point on the manual clock, the time since it started.
    public struct Instant: InstantProtocol, Sendable {
        /// Time since the clock started.
        public let offset: Duration

        /// The instant `offset` after the clock started.
        public init(offset: Duration = .zero) { self.offset = offset }

        /// The instant `duration` later.
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        /// The time from this instant to `other`.
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        /// Whether `lhs` comes before `rhs`.
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        let deadline: Instant
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct Timer {
        let deadline: Instant
        let work: @Sendable () -> Void
    }

    private struct State {
        var now = Instant()
        var nextID = 0
        var sleepers: [Int: Sleeper] = [:]
        var timers: [Int: Timer] = [:]

        mutating func makeID() -> Int {
            nextID += 1
            return nextID
        }
    }

    private let state = LockedState(State())

    /// A clock at offset zero.
    public init() {}

    /// The current instant.
    public var now: Instant { state.withLock { $0.now } }
    /// Zero, as the clock moves exactly as far as it is told.
    public var minimumResolution: Duration { .zero }

    /// How many sleeps and timers wait for the clock to reach their deadline.
    public var pendingSleepers: Int { state.withLock { $0.sleepers.count + $0.timers.count } }

    /// Moves the clock forward by `duration`.
    ///
    /// It runs every timer whose deadline it passes, in deadline order (timers with the same deadline in the
    /// order they were scheduled), each with the clock at its deadline. Then it resumes every sleeper whose
    /// deadline it reached.
    ///
    /// A timer's work runs on the caller's thread, before this returns; a timer it schedules within the
    /// advanced span runs too.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a clock does not go back: advance(by: \(duration))")
        let target = now.advanced(by: duration)
        while let work = state.withLock({ state -> (@Sendable () -> Void)? in
            // The earliest timer (the first scheduled among equals), if the advance reaches it.
            guard let (id, timer) = state.timers.min(by: { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }),
                timer.deadline <= target
            else { return nil }
            state.timers[id] = nil
            if state.now < timer.deadline { state.now = timer.deadline }
            return timer.work
        }) {
            work()
        }
        let due = state.withLock { state -> [Sleeper] in
            if state.now < target { state.now = target }
            let due = state.sleepers.filter { $0.value.deadline <= target }
            for id in due.keys { state.sleepers[id] = nil }
            return due.sorted { $0.key < $1.key }.map(\.value)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Suspends until the clock reaches `deadline`.
    ///
    /// - Throws: `CancellationError` when the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { $0.makeID() }
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

    /// Registers `work` to run inside the ``advance(by:)`` that reaches `deadline`.
    ///
    /// It runs at once if the deadline has passed.
    ///
    /// - Returns: what cancels it.
    package func schedule(at deadline: Instant, _ work: @escaping @Sendable () -> Void) -> ScheduledWork {
        let id = state.withLock { state -> Int? in
            guard state.now < deadline else { return nil }
            let id = state.makeID()
            state.timers[id] = Timer(deadline: deadline, work: work)
            return id
        }
        guard let id else {
            work()
            return ScheduledWork {}
        }
        return ScheduledWork { [weak self] in _ = self?.state.withLock { $0.timers.removeValue(forKey: id) } }
    }

    /// Ends a sleep with `CancellationError`, unless an advance or an earlier cancellation ended it.
    private func cancelSleeper(_ id: Int) {
        let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
        sleeper?.continuation.resume(throwing: CancellationError())
    }
}
