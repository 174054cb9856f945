import StoreConcurrency

/// Counts the controller's work in flight.
///
/// The work is events not yet handled, an attach, a drain and a close. A caller can wait until the app is
/// idle, which the command-line tool does after every command.
final class WorkTracker: Sendable {
    private struct State {
        var inFlight = 0
        var idleWaiters = WaitList()
    }

    private let state = LockedState(State())

    func begin() {
        state.withLock { $0.inFlight += 1 }
    }

    func end() {
        state.withLock { state -> WaitList.Released in
            state.inFlight -= 1
            precondition(state.inFlight >= 0, "work ended more often than it began")
            guard state.inFlight == 0 else { return .none }
            return state.idleWaiters.takeAll()
        }.resume()
    }

    /// Returns once no work is in flight.
    func waitUntilIdle() async {
        await state.wait(on: \.idleWaiters) { $0.inFlight > 0 }
    }
}
