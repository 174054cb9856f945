public import SecureKeys

/// Something that happens to the app's store stack.
public enum LaunchEvent: Sendable, Hashable {
    /// The app launched.
    case launch(LaunchOptions)
    /// The device locked: keys of class A will be wiped when the grace period ends.
    case protectedDataWillBecomeUnavailable
    /// The grace period ended: class-A keys are wiped now.
    case protectedDataDidBecomeUnavailable
    /// The device unlocked.
    case protectedDataDidBecomeAvailable
    /// The store attached: its key was available and it opened.
    case attachSucceeded
    /// The store did not attach.
    case attachFailed(AttachFailure)
    /// A UI-facing operation was queued.
    case operationSubmitted
    /// The app is terminating.
    case terminate
}

/// Why an attach failed, as far as the launch logic cares.
public enum AttachFailure: Sendable, Hashable {
    /// The store's key is not available now (locked, before the first unlock): wait for the event, show nothing.
    case protectedDataUnavailable
    /// Protected data was available and the store still did not attach: show the error, once.
    case error(StoreError)
}

/// What the shell must do in answer to an event.
public enum LaunchEffect: Sendable, Hashable {
    /// Attach the store on a background executor and report ``LaunchEvent/attachSucceeded`` or
    /// ``LaunchEvent/attachFailed(_:)``.
    case attachStore
    /// Close the store after its in-flight work and forget the coordinator.
    case closeStore
    /// Run queued operations, in order, on the main actor.
    case drainQueue
    /// Report every queued operation as failed with this error.
    case failQueue(StoreError)
    /// Report every queued operation as cancelled.
    case cancelQueue
    /// Stop taking user interaction (`beginIgnoringInteractionEvents`).
    case disableInteraction
    /// Take user interaction again.
    case enableInteraction
    /// Show this error to the user.
    case presentError(StoreError)
}

/// The launch and protected-data logic as a pure state machine: (state, event) → (state, effects).
///
/// No I/O, no clock, no concurrency: the app's shell (``DataController``) interprets the effects with actors
/// and a background executor; the test harness interprets the same effects synchronously. The rules:
///
/// - The coordinator exists only in ``Phase/ready``: it is assigned after a successful attach, never before.
/// - An attach that fails because protected data is unavailable waits for *did become available*, silently.
/// - An attach that fails while protected data is available is presented once and is not retried in a loop.
/// - A class-A store closes at *will become unavailable* (and, if it attached during the grace period, at
///   *did become unavailable*); class B, C and D stores stay open.
public struct LaunchMachine: Sendable, Hashable {
    /// Where the store stack is.
    public enum Phase: Sendable, Hashable {
        /// The app has not launched yet.
        case notLaunched
        /// The store is being attached.
        case launching
        /// The store's key is not available; operations queue until the device unlocks.
        case waitingForProtectedData
        /// The store is attached; operations run.
        case ready
        /// Attaching failed while protected data was available; the error was presented.
        case failed(StoreError)
        /// The app terminated.
        case terminated

        /// The word used in scripts: `launching`, `waiting`, `ready`, `failed`, `terminated`.
        public var name: String {
            switch self {
            case .notLaunched: "not-launched"
            case .launching: "launching"
            case .waitingForProtectedData: "waiting"
            case .ready: "ready"
            case .failed: "failed"
            case .terminated: "terminated"
            }
        }
    }

    /// The store's protection class: it decides what a lock does to an open store.
    public let protectionClass: ProtectionClass
    /// Where the stack is.
    public private(set) var phase: Phase = .notLaunched
    /// Whether the UI takes interaction: only once setup completed.
    public private(set) var isInteractionEnabled = true
    /// The error shown to the user, if any.
    public private(set) var presentedError: StoreError?
    /// Why the app launched.
    public private(set) var launchOptions: LaunchOptions?

    /// An unlock arrived while an attach was running: if that attach reports "unavailable", it read the state
    /// before the unlock, so attach again instead of waiting for an event that has already passed.
    private var becameAvailableDuringAttach = false
    /// A lock arrived while a class-A store was being attached: close it as soon as it attaches.
    private var lockedDuringAttach = false

    public init(protectionClass: ProtectionClass) {
        self.protectionClass = protectionClass
    }

    /// Whether a lock closes this store: class A only (class B stays usable once open, C until reboot).
    private var closesAtLock: Bool { protectionClass == .complete }

    /// Applies `event` and returns what the shell must do, in order.
    public mutating func handle(_ event: LaunchEvent) -> [LaunchEffect] {
        switch event {
        case .launch(let options):
            guard phase == .notLaunched else { return [] }
            launchOptions = options
            phase = .launching
            isInteractionEnabled = false
            return [.disableInteraction, .attachStore]

        case .attachSucceeded:
            guard phase == .launching else { return [.closeStore] }  // terminated meanwhile
            if lockedDuringAttach {
                lockedDuringAttach = false
                phase = .waitingForProtectedData
                return [.closeStore]
            }
            phase = .ready
            isInteractionEnabled = true
            return [.enableInteraction, .drainQueue]

        case .attachFailed(.protectedDataUnavailable):
            guard phase == .launching else { return [] }
            if becameAvailableDuringAttach {
                becameAvailableDuringAttach = false
                return [.attachStore]
            }
            phase = .waitingForProtectedData
            return []

        case .attachFailed(.error(let error)):
            guard phase == .launching else { return [] }
            phase = .failed(error)
            presentedError = error
            return [.presentError(error), .failQueue(error)]

        case .protectedDataDidBecomeAvailable:
            switch phase {
            case .waitingForProtectedData:
                phase = .launching
                lockedDuringAttach = false
                return [.attachStore]
            case .launching:
                becameAvailableDuringAttach = true
                lockedDuringAttach = false
                return []
            default:
                return []
            }

        case .protectedDataWillBecomeUnavailable, .protectedDataDidBecomeUnavailable:
            // A class-A store closes at the lock; one that attached during the grace period (after the lock's
            // event) closes when its keys are wiped. Class B, C and D stores stay open.
            guard closesAtLock else { return [] }
            switch phase {
            case .ready:
                phase = .waitingForProtectedData
                isInteractionEnabled = false
                return [.disableInteraction, .closeStore]
            case .launching:
                lockedDuringAttach = true
                becameAvailableDuringAttach = false
                return []
            default:
                return []
            }

        case .operationSubmitted:
            switch phase {
            case .ready: return [.drainQueue]
            case .failed(let error): return [.failQueue(error)]
            case .terminated: return [.cancelQueue]
            default: return []
            }

        case .terminate:
            guard phase != .terminated else { return [] }
            phase = .terminated
            isInteractionEnabled = false
            return [.closeStore, .cancelQueue]
        }
    }
}
