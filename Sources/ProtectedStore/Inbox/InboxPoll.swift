internal import ProtectedData
internal import SecureKeys
import StoreConcurrency

/// Looks at a store's inbox file every interval while the store is attached, for records another process (an
/// extension) appended, and calls `onPending` when there are some.
///
/// A look is one `stat`, made wherever the clock's timer runs — not on the main actor — so an idle poll costs
/// no hop between threads; only a look that finds records calls `onPending`, which hops to merge them.
final class InboxPoll: Sendable {
    private struct State {
        var timer: ScheduledWork?
        var stopped = false
    }

    private let inbox: LockedInbox
    private let clock: Timekeeper
    private let interval: Duration
    private let onPending: @Sendable () -> Void
    private let state = LockedState(State())

    /// Starts looking, first at `interval` from now.
    init(inbox: LockedInbox, clock: Timekeeper, interval: Duration, onPending: @escaping @Sendable () -> Void) {
        self.inbox = inbox
        self.clock = clock
        self.interval = interval
        self.onPending = onPending
        arm(after: clock.now)
    }

    /// Stops looking. Stopping twice is harmless.
    func stop() {
        let timer = state.withLock { state -> ScheduledWork? in
            state.stopped = true
            defer { state.timer = nil }
            return state.timer
        }
        timer?.cancel()
    }

    private func arm(after instant: Timekeeper.Instant) {
        let deadline = instant + interval
        // The next look is at a deadline strictly after the clock's time, so scheduling it never runs it here.
        let timer = clock.schedule(at: deadline) { [weak self] in self?.look(at: deadline) }
        let stopped = state.withLock { state -> Bool in
            if !state.stopped { state.timer = timer }
            return state.stopped
        }
        if stopped { timer.cancel() }
    }

    private func look(at deadline: Timekeeper.Instant) {
        guard !state.withLock({ $0.stopped }) else { return }
        if inbox.hasPendingRecords { onPending() }
        arm(after: deadline)
    }
}
