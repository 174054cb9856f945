internal import DequeModule
import SecureKeys
import StoreConcurrency


/// Delivers events to subscribers in order, exactly once each, including events raised by a subscriber
/// while it is being called (they queue behind the current one instead of overtaking it).
///
/// A subscriber sees exactly the events published after it subscribed: each event carries a sequence
/// number, each subscriber the number it started after. The owner publishes and subscribes under its own
/// state lock, so the availability it reads while subscribing and the events the subscriber then gets
/// never disagree.
package final class EventHub<Event: Sendable>: Sendable {
    package typealias Handler = @Sendable (Event) -> Void

    private struct Subscriber {
        let startsAfter: UInt64
        let handler: Handler
    }

    private struct State {
        var subscribers = Subscribers<Subscriber>()
        var pending: Deque<(sequence: UInt64, event: Event)> = []
        var lastSequence: UInt64 = 0
        var delivering = false
    }

    private let state = LockedState(State())

    package init() {}

    /// Adds a subscriber that will get every event published from now on.
    package func subscribe(_ handler: @escaping Handler) -> EventSubscription {
        let id = state.withLock { state in
            state.subscribers.add(Subscriber(startsAfter: state.lastSequence, handler: handler))
        }
        return EventSubscription { [weak self] in
            _ = self?.state.withLock { $0.subscribers.remove(id) }
        }
    }

    /// Queues `event`. Call ``deliverPending()`` once the owner's own lock is released.
    package func enqueue(_ event: Event) {
        state.withLock { state in
            state.lastSequence += 1
            state.pending.append((state.lastSequence, event))
        }
    }

    /// Delivers queued events in order, unless a delivery is already running further up this call stack or
    /// on another thread (that one will deliver them, in order).
    package func deliverPending() {
        guard state.withLock({ state -> Bool in
            if state.delivering { return false }
            state.delivering = true
            return true
        }) else { return }
        while true {
            let next = state.withLock { state -> (UInt64, Event, [Subscriber])? in
                guard let (sequence, event) = state.pending.popFirst() else {
                    state.delivering = false
                    return nil
                }
                let receivers = state.subscribers.inOrder.filter { $0.startsAfter < sequence }
                return (sequence, event, receivers)
            }
            guard let (_, event, receivers) = next else { return }
            for receiver in receivers { receiver.handler(event) }
        }
    }
}

/// A registration for events.
///
/// It is cancelled explicitly or when released.
public final class EventSubscription: Sendable {
    private let cancellation: LockedState<[@Sendable () -> Void]>

    /// A subscription that runs `cancel` once when it ends.
    ///
    /// It ends when ``cancel()`` is called, or when it is released.
    ///
    /// For a ``KeyAvailabilityMonitor`` an app writes itself: `cancel` removes the subscriber's handler, so no
    /// event reaches it afterwards.
    ///
    /// - Parameter cancel: what ends the delivery; called at most once, on the thread that cancels or releases.
    public init(onCancel cancel: @escaping @Sendable () -> Void) {
        cancellation = LockedState([cancel])
    }

    /// Runs `action` when the subscription ends.
    public func onCancel(_ action: @escaping @Sendable () -> Void) {
        cancellation.withLock { $0.append(action) }
    }

    /// Stops delivery. Cancelling twice is harmless.
    public func cancel() {
        let actions = cancellation.withLock { actions in
            defer { actions.removeAll() }
            return actions
        }
        for action in actions { action() }
    }

    deinit { cancel() }
}
