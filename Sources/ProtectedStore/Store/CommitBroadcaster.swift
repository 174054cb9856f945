internal import EncryptedSQLite
internal import SecureKeys
import StoreConcurrency

/// Tells observations which tables each committed transaction wrote.
///
/// Each subscriber has a pending region — the union of the commits it has not looked at yet — and a signal
/// that holds at most one wake-up: a burst of commits costs an observation one re-read, and no commit is
/// lost, since its tables are in the pending region until taken. ``finish()`` (the store closed) ends every
/// subscription; subscribing after it returns one that is already over.
final class CommitBroadcaster: Sendable {
    /// One observation's view of the commits.
    final class Subscription: Sendable {
        /// A wake-up per batch of commits.
        ///
        /// It ends when the store closes.
        let signals: AsyncStream<Void>
        fileprivate let id: Int
        fileprivate weak let broadcaster: CommitBroadcaster?

        fileprivate init(signals: AsyncStream<Void>, id: Int, broadcaster: CommitBroadcaster) {
            self.signals = signals
            self.id = id
            self.broadcaster = broadcaster
        }

        /// The tables written since the last call, emptied.
        func takeWrites() -> TableRegion {
            broadcaster?.takePending(id) ?? TableRegion()
        }

        deinit {
            broadcaster?.unsubscribe(id)
        }
    }

    private struct Subscriber {
        var pending = TableRegion()
        let continuation: AsyncStream<Void>.Continuation
    }

    private struct State {
        var subscribers = Subscribers<Subscriber>()
        var isFinished = false
    }

    private let state = LockedState(State())

    /// A new subscription, which sees the commits made from now on.
    func subscribe() -> Subscription {
        let (signals, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state -> Int in
            if state.isFinished {
                continuation.finish()
                return state.subscribers.skipID()
            }
            return state.subscribers.add(Subscriber(continuation: continuation))
        }
        return Subscription(signals: signals, id: id, broadcaster: self)
    }

    /// Tells every subscriber that a commit wrote `region`.
    func send(_ region: TableRegion) {
        guard !region.isEmpty else { return }
        state.withLock { state in
            for id in state.subscribers.ids {
                state.subscribers[id]!.pending.formUnion(region)
                state.subscribers[id]!.continuation.yield()
            }
        }
    }

    /// Ends every subscription, now and to come.
    func finish() {
        let subscribers = state.withLock { state -> [Subscriber] in
            state.isFinished = true
            return state.subscribers.removeAll()
        }
        for subscriber in subscribers { subscriber.continuation.finish() }
    }

    private func takePending(_ id: Int) -> TableRegion {
        state.withLock { state in
            defer { state.subscribers[id]?.pending = TableRegion() }
            return state.subscribers[id]?.pending ?? TableRegion()
        }
    }

    private func unsubscribe(_ id: Int) {
        let subscriber = state.withLock { $0.subscribers.remove(id) }
        subscriber?.continuation.finish()
    }
}
