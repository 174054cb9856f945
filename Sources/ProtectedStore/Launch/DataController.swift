internal import Clocks
public import ProtectedData
public import SecureKeys

/// The top-level controller that owns the store stack, kept out of the app delegate.
///
/// Two-phase launch, as Apple's Core Data start-up guide describes it:
/// 1. ``launch(_:)`` returns at once — whatever the store's size and whether its key is available — so the
///    app can finish launching and show a "launching" state.
/// 2. The store attaches on a background executor (``StoreCoordinator/attach(_:keys:)``); the result is
///    delivered on the main actor, where ``coordinator`` is assigned — only if the attach succeeded.
///
/// When the store's key is not available (the device is locked, or has not been unlocked since boot),
/// nothing is shown to the user: UI-facing operations queue (``submit(_:deadline:_:)``), interaction stays
/// disabled, and the *protected data did become available* event runs the deferred setup — attach, assign
/// the coordinator, enable interaction, then run the queue in order, each operation exactly once.
///
/// The decisions are made by ``LaunchMachine``, a pure state machine; this class interprets its effects.
@MainActor
public final class DataController {
    /// How the controller runs.
    public struct Configuration: Sendable {
        /// The store to attach.
        public var store: StoreConfiguration
        /// How many operations may wait for protected data; more are refused with `queue-full`.
        public var queueCapacity: Int
        /// Simulation only: how much (clock) time passes before an attach starts, to observe phase 1 and
        /// phase 2 of the launch apart. Nothing is read or merged before then, so an app that dies during the
        /// delay did no work. Zero in an app.
        public var attachDelay: Duration

        /// A bug planted on purpose, so tests can show the simulator catches it. Never set in an app.
        public var plantedFault: PlantedFault?
        /// Whether a task sleeps on the clock to start a delayed attach. Off where the owner of a test clock
        /// calls ``DataController/clockDidAdvance()`` itself, so nothing runs between its steps.
        public var schedulesTimers = true

        public init(store: StoreConfiguration, queueCapacity: Int = 100_000, attachDelay: Duration = .zero) {
            self.store = store
            self.queueCapacity = queueCapacity
            self.attachDelay = attachDelay
        }
    }

    /// Bugs the simulator's own tests plant, to prove its invariants catch them.
    public enum PlantedFault: String, Sendable, CaseIterable {
        /// The seed's bug in another guise: the coordinator is kept after its store closed, so app code
        /// holds a coordinator with no usable store behind it.
        case keepCoordinatorAfterClose = "keep-coordinator-after-close"
    }

    /// The device (or OS) the controller learns key availability and store keys from.
    public typealias KeySource = KeyAvailabilityMonitor & StoreKeyProvider

    /// The configuration.
    public let configuration: Configuration
    /// The attached store's coordinator: `nil` until an attach succeeded, and again after the store closed.
    public private(set) var coordinator: StoreCoordinator?
    /// Called once when an error is presented to the user.
    public var onPresentError: (@MainActor (StoreError) -> Void)?
    /// Called after each merge of the locked inbox that applied or found anything.
    public var onInboxMerged: (@MainActor (InboxMergeReport) -> Void)?
    /// Called with each operation as it ends (ran, failed, cancelled, expired), in order.
    public var onOperationFinished: (@MainActor (OperationTicket) -> Void)? {
        didSet { gate.onFinish = onOperationFinished }
    }

    private var machine: LaunchMachine
    private let keys: any KeySource
    private let clock: AnyClock<Duration>
    private let gate: OperationGate
    private let work = WorkTracker()
    private var subscription: EventSubscription?
    private var isDraining = false
    private var delayedAttachStart: AnyClock<Duration>.Instant?
    private var attachGeneration = 0
    private var isAbandoned = false

    /// Phase 1: creates the controller. Cheap: no file is touched and no key is asked for.
    public init(configuration: Configuration, keys: any KeySource, clock: any Clock<Duration> = ContinuousClock()) {
        self.configuration = configuration
        self.keys = keys
        self.clock = (clock as? AnyClock<Duration>) ?? AnyClock(clock)
        self.machine = LaunchMachine(protectionClass: configuration.store.protectionClass)
        self.gate = OperationGate(capacity: configuration.queueCapacity)
    }

    // MARK: State

    /// Where the stack is: launching, waiting for protected data, ready, failed.
    public var phase: LaunchMachine.Phase { machine.phase }
    /// Whether the UI takes interaction: only once the setup completed.
    public var isInteractionEnabled: Bool { machine.isInteractionEnabled }
    /// The error shown to the user, if any: only for a failure while protected data was available.
    public var presentedError: StoreError? { machine.presentedError }
    /// Operations waiting to run.
    public var queuedOperationCount: Int { gate.count }
    /// Names of the waiting operations, in order.
    public var queuedOperationNames: [String] { gate.names }
    /// Why the app launched.
    public var launchOptions: LaunchOptions? { machine.launchOptions }

    // MARK: Launch

    /// Starts the launch and returns at once; the store attaches in the background.
    ///
    /// Subscribes to the key-availability events first, atomically with reading the current state, so an
    /// unlock that happens while the attach runs is never missed.
    public func launch(_ options: LaunchOptions = LaunchOptions()) {
        guard machine.phase == .notLaunched else { return }
        let (stream, continuation) = AsyncStream.makeStream(of: ProtectedDataEvent.self, bufferingPolicy: .unbounded)
        let work = self.work
        subscription = keys.subscribe { event in
            work.begin()
            continuation.yield(event)
        }.subscription
        subscription?.onCancel { continuation.finish() }
        Task { [weak self] in
            for await event in stream {
                self?.handle(event)
                work.end()
            }
        }
        apply(.launch(options))
    }

    /// The app is terminating: close the store, cancel what waits.
    public func terminate() {
        apply(.terminate)
        subscription?.cancel()
        subscription = nil
    }

    /// Simulation only: the app's process is killed. Nothing is cleaned up — the store is neither
    /// checkpointed nor closed, queued operations never end — and the controller reacts to nothing again.
    public func abandon() {
        isAbandoned = true
        subscription?.cancel()
        subscription = nil
    }

    /// Returns once every event, attach, drain and close the controller started has finished (an attach
    /// delayed by ``Configuration/attachDelay`` waits for the clock and does not count until it starts).
    public func waitUntilIdle() async {
        await work.waitUntilIdle()
    }

    /// Tells the controller its clock moved (a test clock): starts an attach whose delay has passed and
    /// expires operations whose deadline has passed.
    public func clockDidAdvance() {
        gate.expireOverdue(now: clock.now)
        if let start = delayedAttachStart, clock.now >= start {
            delayedAttachStart = nil
            if !isAbandoned && machine.phase == .launching { beginAttach() }
        }
    }

    // MARK: Operations

    /// Submits a UI-facing operation: it runs on the main actor with the store once setup has completed —
    /// at once if it has — in submission order, exactly once.
    ///
    /// - Parameters:
    ///   - name: a name for logs and tests.
    ///   - deadline: how long it may wait; past it, the operation ends as ``OperationOutcome/expired``.
    ///   - body: the operation.
    /// - Returns: its ticket, to cancel it or await its outcome.
    /// - Throws: `queue-full` when the queue is at its capacity: the operation was not queued.
    @discardableResult
    public func submit(_ name: String, deadline: Duration? = nil, _ body: @escaping StoreOperation) throws -> OperationTicket {
        let ticket = try gate.enqueue(name: name, deadline: deadline.map { clock.now.advanced(by: $0) }, body: body)
        apply(.operationSubmitted)
        return ticket
    }

    /// Runs `body` now if the store is ready, or when it becomes ready, and returns its result.
    ///
    /// - Throws: what `body` throws; `queue-full`; the attach error if the store failed; `cancelled`,
    ///   `deadline-exceeded`.
    public func perform<Result: Sendable>(
        _ name: String, deadline: Duration? = nil, _ body: @escaping @MainActor (StoreCoordinator) async throws -> Result
    ) async throws -> Result {
        var result: Result?
        let ticket = try submit(name, deadline: deadline) { coordinator in result = try await body(coordinator) }
        switch await ticket.result() {
        case .completed: return result!
        case .failed(let error): throw error
        case .cancelled: throw StoreError.cancelled
        case .expired: throw StoreError.deadlineExceeded
        }
    }

    /// Cancels a waiting operation.
    ///
    /// - Returns: `false` when it already ran, runs now, or ended.
    @discardableResult
    public func cancel(_ ticket: OperationTicket) -> Bool {
        gate.cancel(ticket)
    }

    // MARK: Locked inbox

    /// The store's locked inbox.
    public var inbox: LockedInbox { LockedInbox(storePath: configuration.store.path) }

    /// Writes `change` even while the store cannot be opened: sealed to the store's inbox public key and
    /// appended durably before this returns. When the store is attached it is merged at once; otherwise at
    /// the next attach (the deferred setup).
    ///
    /// - Throws: `inbox-unavailable` before the store first attached; `io-error`.
    @discardableResult
    public func appendToInbox(_ change: InboxEntry.Change) throws -> InboxEntry {
        try appendToInbox(contentsOf: [change])[0]
    }

    /// Writes several changes to the locked inbox with one `fsync` (see ``appendToInbox(_:)``).
    @discardableResult
    public func appendToInbox(contentsOf changes: [InboxEntry.Change]) throws -> [InboxEntry] {
        let entries = try inbox.append(contentsOf: changes)
        if machine.phase == .ready, let coordinator {
            work.begin()
            Task { [weak self, work] in
                if let report = try? await coordinator.mergeInbox() { self?.reportInbox(report) }
                work.end()
            }
        }
        return entries
    }

    private func reportInbox(_ report: InboxMergeReport) {
        if report.merged > 0 || report.alreadyApplied > 0 || !report.problems.isEmpty { onInboxMerged?(report) }
    }

    // MARK: Interpreting the state machine

    private func handle(_ event: ProtectedDataEvent) {
        switch event {
        case .willBecomeUnavailable: apply(.protectedDataWillBecomeUnavailable)
        case .didBecomeAvailable: apply(.protectedDataDidBecomeAvailable)
        case .didBecomeUnavailable: apply(.protectedDataDidBecomeUnavailable)
        }
    }

    private func apply(_ event: LaunchEvent) {
        guard !isAbandoned else { return }
        for effect in machine.handle(event) { perform(effect) }
    }

    private func perform(_ effect: LaunchEffect) {
        switch effect {
        case .attachStore: startAttach()
        case .closeStore: closeStore()
        case .drainQueue: startDrain()
        case .failQueue(let error): gate.finishAll(.failed(error))
        case .cancelQueue: gate.finishAll(.cancelled)
        case .presentError(let error): onPresentError?(error)
        case .enableInteraction, .disableInteraction: break  // the machine holds the flag; UI reads it
        }
    }

    private enum AttachResult: Sendable {
        case attached(StoreCoordinator)
        case failed(AttachFailure)
    }

    private func startAttach() {
        guard configuration.attachDelay > .zero else { return beginAttach() }
        let start = clock.now.advanced(by: configuration.attachDelay)
        delayedAttachStart = start
        guard configuration.schedulesTimers else { return }
        let clock = self.clock
        Task { [weak self] in
            try? await clock.sleep(until: start)
            self?.clockDidAdvance()
        }
    }

    private func beginAttach() {
        attachGeneration += 1
        let generation = attachGeneration
        let store = configuration.store
        let keys = self.keys
        work.begin()
        Task.detached(priority: .userInitiated) { [weak self] in
            let result = Self.attach(store, keys: keys)
            await self?.attachFinished(result, generation: generation)
            self?.work.end()
        }
    }

    /// Runs on a background executor: opens the store, and classifies a failure the way the seed does —
    /// protected data unavailable means wait quietly; anything else while it is available is presented.
    private nonisolated static func attach(_ store: StoreConfiguration, keys: any KeySource) -> AttachResult {
        do {
            return .attached(try StoreCoordinator.attach(store, keys: keys))
        } catch {
            if !keys.isProtectedDataAvailable(for: store.protectionClass) {
                return .failed(.protectedDataUnavailable)
            }
            return .failed(.error(StoreError(error)))
        }
    }

    private func attachFinished(_ result: AttachResult, generation: Int) {
        guard !isAbandoned else { return }
        // The attach merged the locked inbox into the store whether or not the store is kept: say so.
        if case .attached(let attached) = result { reportInbox(attached.inboxReportAtAttach) }
        guard generation == attachGeneration else {
            if case .attached(let stale) = result { close(stale) }
            return
        }
        deliver(result)
    }

    private func deliver(_ result: AttachResult) {
        guard !isAbandoned else { return }
        switch result {
        case .attached(let attached):
            let effects = machine.handle(.attachSucceeded)
            // Assigned only now, after a successful attach, and only if the machine kept the store.
            if machine.phase == .ready {
                coordinator = attached
            } else {
                close(attached)
            }
            for effect in effects { perform(effect) }
        case .failed(let failure):
            apply(.attachFailed(failure))
        }
    }

    private func closeStore() {
        guard let closing = coordinator else { return }
        if configuration.plantedFault != .keepCoordinatorAfterClose { coordinator = nil }
        close(closing)
    }

    /// Closes a coordinator off the main actor; ``waitUntilIdle()`` waits for it.
    private func close(_ closing: StoreCoordinator) {
        work.begin()
        let work = self.work
        Task.detached {
            await closing.close()
            work.end()
        }
    }

    private func startDrain() {
        guard !isDraining else { return }
        isDraining = true
        work.begin()
        Task { [weak self] in
            await self?.drain()
            self?.isDraining = false
            self?.work.end()
        }
    }

    /// Runs waiting operations in order while the store is ready. An operation taken from the queue ends
    /// exactly once: if the store closes while it runs, it fails; it is never put back.
    private func drain() async {
        while machine.phase == .ready, !isAbandoned, let coordinator, let entry = gate.next(now: clock.now) {
            do {
                try await entry.body(coordinator)
                gate.finish(entry.ticket, .completed)
            } catch {
                gate.finish(entry.ticket, .failed(StoreError(error)))
            }
        }
    }
}
