import SecureKeys
import StoreConcurrency


/// Counts the controller's work in flight (events not yet handled, an attach, a drain, a close), so a caller
/// can wait until the app is idle — what the command-line tool does after every command.
final class WorkTracker: Sendable {
    private struct State {
        var inFlight = 0
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = LockedState(State())

    func begin() {
        state.withLock { $0.inFlight += 1 }
    }

    func end() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.inFlight -= 1
            precondition(state.inFlight >= 0, "work ended more often than it began")
            guard state.inFlight == 0 else { return [] }
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once no work is in flight.
    func waitUntilIdle() async {
        await withCheckedContinuation { continuation in
            let idle = state.withLock { state -> Bool in
                if state.inFlight == 0 { return true }
                state.waiters.append(continuation)
                return false
            }
            if idle { continuation.resume() }
        }
    }
}
