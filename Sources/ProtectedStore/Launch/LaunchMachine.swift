/// Something that happens to the app's store stack.
package enum LaunchEvent<Store: Sendable>: Sendable {
    /// The app launched.
    case launch(LaunchOptions)
    /// The device locked.
    ///
    /// Keys of class A will be wiped when the grace period ends.
    case protectedDataWillBecomeUnavailable
    /// The grace period ended.
    ///
    /// Class-A keys are wiped now.
    case protectedDataDidBecomeUnavailable
    /// The device unlocked.
    case protectedDataDidBecomeAvailable
    /// The keys the store was opened with are gone for good (the device erased itself).
    ///
    /// A store of any class closes, as a class-A store does at the lock.
    case storeKeysDestroyed
    /// The attach with this `attempt` opened `store`.
    ///
    /// The attach is the one ``LaunchEffect/attachStore(attempt:)`` started.
    case attachSucceeded(Store, attempt: Int)
    /// The attach with this `attempt` did not open the store.
    case attachFailed(AttachFailure, attempt: Int)
    /// A UI-facing operation was queued.
    case operationSubmitted
    /// The app is terminating.
    case terminate
    /// The app's process was killed.
    ///
    /// Nothing is cleaned up and nothing happens any more.
    case abandon

    /// The event's name for logs, without its payload (a store, an error's message).
    var logName: String {
        switch self {
        case .launch: "launch"
        case .protectedDataWillBecomeUnavailable: "protected-data-will-become-unavailable"
        case .protectedDataDidBecomeUnavailable: "protected-data-did-become-unavailable"
        case .protectedDataDidBecomeAvailable: "protected-data-did-become-available"
        case .storeKeysDestroyed: "store-keys-destroyed"
        case .attachSucceeded: "attach-succeeded"
        case .attachFailed: "attach-failed"
        case .operationSubmitted: "operation-submitted"
        case .terminate: "terminate"
        case .abandon: "abandon"
        }
    }
}

/// Why an attach failed, as far as the launch logic cares.
package enum AttachFailure: Sendable {
    /// The store's key is not available now (locked, before the first unlock).
    ///
    /// Wait for the event, and show nothing.
    case protectedDataUnavailable
    /// Protected data was available and the store still did not attach.
    ///
    /// Show the error, once.
    case error(StoreError)
}

/// What the shell must do in answer to an event.
package enum LaunchEffect<Store: Sendable>: Sendable {
    /// Attach the store on a background executor and report the result with this `attempt` number.
    case attachStore(attempt: Int)
    /// Close this store after its in-flight work.
    case closeStore(Store)
    /// Run queued operations, in order, on the main actor.
    case drainQueue
    /// Report every queued operation as failed with this error.
    case failQueue(StoreError)
    /// Report every queued operation as cancelled (the app terminated).
    case cancelQueue
    /// Stop taking user interaction (`beginIgnoringInteractionEvents`).
    case disableInteraction
    /// Take user interaction again.
    case enableInteraction
    /// Show this error to the user.
    case presentError(StoreError)
}

/// The launch and protected-data logic as a pure state machine.
///
/// It maps (state, event) → (state, effects).
///
/// No I/O, no clock, no concurrency: ``DataController`` interprets the effects with a background executor for
/// the attach and the main actor for everything else. The store lives *in* the state: ``State/ready(_:)`` is
/// the only place it is kept, so "the coordinator is assigned only after a successful attach, and forgotten
/// when it closes" is not a rule the shell must remember but the only thing the type allows. The rules:
///
/// - An attach that fails because protected data is unavailable waits for *did become available*, silently.
/// - An attach that fails while protected data is available is presented once and is not retried in a loop.
/// - A class-A store closes at *will become unavailable* (and, if it attached during the grace period, at
///   *did become unavailable*); class B, C and D stores stay open.
/// - A result of an attach the machine no longer waits for (the app terminated, or a newer attempt started)
///   closes the store it opened and changes nothing else.
package struct LaunchMachine<Store: Sendable>: Sendable {
    /// An attach under way.
    package struct Attach: Sendable, Hashable {
        /// The attempt's number.
        ///
        /// Results of other attempts are stale.
        package var attempt: Int
        /// Whether an unlock arrived while the attempt ran.
        ///
        /// If it reports "unavailable", it read the state before the unlock, so attach again instead of waiting
        /// for an event that has already passed.
        package var becameAvailable = false
        /// Whether a lock arrived while a class-A store was being attached.
        ///
        /// If so, close it as soon as it attaches.
        package var locked = false
    }

    /// Where the store stack is.
    package enum State: Sendable {
        case notLaunched
        case launching(Attach)
        case waitingForProtectedData
        case ready(Store)
        case failed(StoreError)
        case terminated
        /// The process was killed.
        ///
        /// Whatever store was attached stays as it was, open, never checkpointed or closed, as a killed process
        /// leaves its files to the kernel.
        case abandoned(Store?)
    }

    /// The store's protection class.
    ///
    /// It decides what a lock does to an open store.
    package let protectionClass: ProtectionClass
    /// Where the stack is.
    package private(set) var state: State = .notLaunched
    /// Whether the UI takes interaction.
    ///
    /// It does only once setup completed.
    package private(set) var isInteractionEnabled = true
    /// The error shown to the user, if any.
    package private(set) var presentedError: StoreError?
    /// Why the app launched.
    package private(set) var launchOptions: LaunchOptions?
    private var attempts = 0

    package init(protectionClass: ProtectionClass) {
        self.protectionClass = protectionClass
    }

    /// The store, while the stack is ready.
    package var store: Store? {
        if case .ready(let store) = state { store } else { nil }
    }

    /// The attach the machine waits for, if any.
    package var pendingAttempt: Int? {
        if case .launching(let attach) = state { attach.attempt } else { nil }
    }

    /// Whether a lock closes this store.
    ///
    /// Only class A closes (class B stays usable once open, C until reboot).
    private var closesAtLock: Bool { protectionClass == .complete }

    private mutating func startAttach() -> LaunchEffect<Store> {
        attempts += 1
        state = .launching(Attach(attempt: attempts))
        return .attachStore(attempt: attempts)
    }

    /// The store an abandoned stack left open, handed over once.
    ///
    /// It is handed over to be freed (see `DataController.releaseAbandonedStore()`). `nil` in any other state.
    package mutating func takeAbandonedStore() -> Store? {
        guard case .abandoned(let store?) = state else { return nil }
        state = .abandoned(nil)
        return store
    }

    /// Applies `event` and returns what the shell must do, in order.
    package mutating func handle(_ event: LaunchEvent<Store>) -> [LaunchEffect<Store>] {
        if case .abandoned = state {
            return []
        }
        switch event {
        case .abandon:
            state = .abandoned(store)
            return []

        case .launch(let options):
            guard case .notLaunched = state else { return [] }
            launchOptions = options
            isInteractionEnabled = false
            return [.disableInteraction, startAttach()]

        case .attachSucceeded(let store, let attempt):
            guard case .launching(let attach) = state, attach.attempt == attempt else { return [.closeStore(store)] }
            if attach.locked {
                state = .waitingForProtectedData
                return [.closeStore(store)]
            }
            state = .ready(store)
            isInteractionEnabled = true
            return [.enableInteraction, .drainQueue]

        case .attachFailed(.protectedDataUnavailable, let attempt):
            guard case .launching(let attach) = state, attach.attempt == attempt else { return [] }
            if attach.becameAvailable { return [startAttach()] }
            state = .waitingForProtectedData
            return []

        case .attachFailed(.error(let error), let attempt):
            guard case .launching(let attach) = state, attach.attempt == attempt else { return [] }
            state = .failed(error)
            presentedError = error
            return [.presentError(error), .failQueue(error)]

        case .protectedDataDidBecomeAvailable:
            switch state {
            case .waitingForProtectedData:
                return [startAttach()]
            case .launching(var attach):
                attach.becameAvailable = true
                attach.locked = false
                state = .launching(attach)
                return []
            default:
                return []
            }

        case .protectedDataWillBecomeUnavailable, .protectedDataDidBecomeUnavailable, .storeKeysDestroyed:
            // A class-A store closes at the lock; one that attached during the grace period (after the lock's
            // event) closes when its keys are wiped. Class B, C and D stores stay open — unless their keys
            // were destroyed.
            if case .storeKeysDestroyed = event {} else { guard closesAtLock else { return [] } }
            switch state {
            case .ready(let store):
                state = .waitingForProtectedData
                isInteractionEnabled = false
                return [.disableInteraction, .closeStore(store)]
            case .launching(var attach):
                attach.locked = true
                attach.becameAvailable = false
                state = .launching(attach)
                return []
            default:
                return []
            }

        case .operationSubmitted:
            switch state {
            case .ready: return [.drainQueue]
            case .failed(let error): return [.failQueue(error)]
            case .terminated: return [.cancelQueue]
            default: return []
            }

        case .terminate:
            let open = store
            switch state {
            case .terminated: return []
            default: break
            }
            state = .terminated
            isInteractionEnabled = false
            return (open.map { [.closeStore($0)] } ?? []) + [.cancelQueue]
        }
    }
}

extension LaunchEffect: CustomStringConvertible {
    /// The effect as a word, and the store and the error by what they are.
    ///
    /// Tests and traces compare effects by this text.
    package var description: String {
        switch self {
        case .attachStore(let attempt): "attachStore(\(attempt))"
        case .closeStore(let store): "closeStore(\(store))"
        case .drainQueue: "drainQueue"
        case .failQueue(let error): "failQueue(\(error.code))"
        case .cancelQueue: "cancelQueue"
        case .disableInteraction: "disableInteraction"
        case .enableInteraction: "enableInteraction"
        case .presentError(let error): "presentError(\(error.code))"
        }
    }
}

extension LaunchMachine.State: CustomStringConvertible {
    /// The state as a word (`launching(1)`, `ready(store)`, `failed(store-damaged)`).
    package var description: String {
        switch self {
        case .notLaunched: "notLaunched"
        case .launching(let attach): "launching(\(attach.attempt))"
        case .waitingForProtectedData: "waiting"
        case .ready(let store): "ready(\(store))"
        case .failed(let error): "failed(\(error.code))"
        case .terminated: "terminated"
        case .abandoned: "abandoned"
        }
    }
}
