package import DiskModel
internal import Logging
public import ProtectedData
internal import SecureKeys
internal import StoreConcurrency

/// The top-level controller that owns the store stack, kept out of the app delegate.
///
/// Two-phase launch, as Apple's Core Data start-up guide describes it:
/// 1. ``launch(_:)`` returns at once — whatever the store's size and whether its key is available — so the
///    app can finish launching and show a "launching" state.
/// 2. The store attaches on a background executor; the result is delivered on the main actor, where the
///    ``coordinator`` becomes available — only if the attach succeeded.
///
/// When the store's key is not available (the device is locked, or has not been unlocked since boot),
/// nothing is shown to the user: UI-facing operations queue (``perform(_:deadline:_:)``,
/// ``submit(_:deadline:_:)``), interaction stays disabled, and the *protected data did become available*
/// event runs the deferred setup — attach, enable interaction, then run the queue in order, each operation
/// exactly once.
///
/// The decisions are made by a pure state machine that holds the attached coordinator in its ready state, so
/// there is one source of truth: ``phase`` and ``coordinator`` cannot disagree. Follow them with ``phases()``,
/// ``events()`` or ``observe(_:)``.
@MainActor
public final class DataController {
    /// How the controller runs.
    public struct Configuration: Sendable {
        /// The store to attach.
        public var store: StoreConfiguration
        /// How many operations may wait for protected data.
        ///
        /// More are refused with `StoreError.Code.queueFull`.
        public var queueCapacity: Int
        /// How often the controller looks for and merges records other processes appended to the locked inbox.
        ///
        /// This applies while the store is attached; the other process is for example an extension. Set it to
        /// `nil` to merge only at attach and after this process's own appends. A look is one `stat` of the
        /// inbox file.
        public var inboxPollInterval: Duration? = .seconds(1)
        /// How much (clock) time passes before an attach starts.
        ///
        /// Simulation only. It lets a test observe phase 1 and phase 2 of the launch apart. Nothing is read or
        /// merged before then.
        package var attachDelay: Duration = .zero
        /// A bug planted on purpose, so tests can show the simulator catches it.
        ///
        /// Simulation only.
        package var plantedFault: PlantedFault?

        /// A configuration for `store`.
        ///
        /// - Parameters:
        ///   - store: the store to attach.
        ///   - queueCapacity: how many operations may wait for protected data (at least 1).
        public init(store: StoreConfiguration, queueCapacity: Int = 100_000) {
            self.store = store
            self.queueCapacity = queueCapacity
        }
    }

    /// A registration made by ``observe(_:)``.
    @MainActor
    public final class Observation {
        private var stop: (() -> Void)?

        init(stop: @escaping () -> Void) { self.stop = stop }

        /// Stops the observer from being called. Cancelling twice is harmless.
        public func cancel() {
            stop?()
            stop = nil
        }
    }

    /// The device (or operating system) the controller learns key availability and store keys from.
    public typealias KeySource = KeyAvailabilityMonitor & StoreKeyProvider

    /// The configuration.
    public let configuration: Configuration

    typealias Machine = LaunchMachine<StoreCoordinator>
    var machine: Machine
    private let keys: any KeySource
    let clock: Timekeeper
    private let gate: OperationGate
    let work = WorkTracker()
    /// The `protected-store.launch` log.
    ///
    /// It records phases, attach attempts and queued operations (by their ids, as a name may hold the app's data).
    private let logger = LogSubsystem.launch.makeLogger()
    private var subscription: EventSubscription?
    private var isDraining = false
    private var deadlineTimer: (deadline: Timekeeper.Instant, work: ScheduledWork)?
    var inboxPoll: InboxPoll?
    private var observers = Subscribers<(handler: @MainActor (Event) -> Void, finish: () -> Void)>()
    /// The closed store's coordinator, wrongly kept.
    ///
    /// Only with ``PlantedFault/keepCoordinatorAfterClose``.
    private var plantedStaleCoordinator: StoreCoordinator?

    /// Creates the controller.
    ///
    /// This is phase 1. It is cheap: no file is touched and no key is asked for.
    ///
    /// - Parameters:
    ///   - configuration: the store and the queue's capacity.
    ///   - keys: where key availability and store keys come from (the simulated device in this package).
    ///   - clock: the clock operation deadlines are measured on: `ContinuousClock` in an app, a
    ///     `ManualClock` in tests, where advancing it expires what became due.
    public init(configuration: Configuration, keys: any KeySource, clock: any Clock<Duration> = ContinuousClock()) {
        var configuration = configuration
        configuration.store.plantedFault = configuration.plantedFault
        self.configuration = configuration
        self.keys = keys
        self.clock = Timekeeper(clock)
        self.machine = Machine(protectionClass: configuration.store.protectionClass)
        self.gate = OperationGate(capacity: configuration.queueCapacity)
        gate.onFinish = { [weak self] ticket in
            self?.logger.trace(
                "operation finished",
                metadata: ["id": "\(ticket.id)", "outcome": "\(ticket.outcome?.logName ?? "none")"])
            self?.emit(.operationFinished(ticket))
        }
    }

    /// A controller that goes away ends what it started, as ``terminate()`` does but without waiting.
    ///
    /// Operations still queued end as cancelled (none is dropped unreported), and the event sequences end.
    /// The store closes once the work already queued on it has ended (a write in flight from a task that still
    /// holds the coordinator finishes first), so the write-ahead log is checkpointed away and the store's
    /// threads end.
    isolated deinit {
        subscription?.cancel()
        deadlineTimer?.work.cancel()
        inboxPoll?.stop()
        gate.finishAll(.cancelled)
        finishObservers()
        if case .ready(let store) = machine.state { Self.close(store, reason: .closedByApp) }
    }

    // MARK: State

    /// Where the stack is.
    ///
    /// It is launching, waiting for protected data, ready, or failed.
    public var phase: Phase {
        switch machine.state {
        case .notLaunched: .notLaunched
        case .launching: .launching
        case .waitingForProtectedData: .waitingForProtectedData
        case .ready: .ready
        case .failed(let error): .failed(error)
        case .terminated, .abandoned: .terminated
        }
    }

    /// The attached store's coordinator.
    ///
    /// It is set exactly while ``phase`` is ``Phase/ready``.
    public var coordinator: StoreCoordinator? { machine.store ?? plantedStaleCoordinator }
    /// Whether the UI takes interaction.
    ///
    /// It does only once the setup completed.
    public var isInteractionEnabled: Bool { machine.isInteractionEnabled }
    /// The error shown to the user, if any.
    ///
    /// It is set only for a failure while protected data was available.
    public var presentedError: StoreError? { machine.presentedError }
    /// Operations waiting to run.
    public var queuedOperationCount: Int { gate.count }
    /// Names of the waiting operations, in order.
    public var queuedOperationNames: [String] { gate.names }
    /// Why the app launched.
    public var launchOptions: LaunchOptions? { machine.launchOptions }

    // MARK: Observing

    /// Calls `handler` on the main actor with every later event, in order, until the returned observation
    /// is cancelled or the controller terminates. Any number of observers may follow one controller.
    ///
    /// - Returns: the observation; keep it to cancel it.
    @discardableResult
    public func observe(_ handler: @escaping @MainActor (Event) -> Void) -> Observation {
        addObserver(handler, finish: {})
    }

    /// Every later event as an asynchronous sequence.
    ///
    /// It ends when the controller terminates or the consuming task is cancelled.
    public func events() -> AsyncStream<Event> {
        let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        connect(continuation) { event in continuation.yield(event) }
        return stream
    }

    /// The current phase, then every change of phase, as an asynchronous sequence.
    ///
    /// It ends after ``Phase/terminated`` or when the consuming task is cancelled.
    public func phases() -> AsyncStream<Phase> {
        let (stream, continuation) = AsyncStream.makeStream(of: Phase.self, bufferingPolicy: .unbounded)
        continuation.yield(phase)
        connect(continuation) { event in
            if case .phaseChanged(let phase) = event { continuation.yield(phase) }
        }
        return stream
    }

    private func connect<Element>(_ continuation: AsyncStream<Element>.Continuation, _ handler: @escaping @MainActor (Event) -> Void) {
        if case .terminated = phase { return continuation.finish() }
        let observation = addObserver(handler, finish: { continuation.finish() })
        continuation.onTermination = { _ in Task { @MainActor in observation.cancel() } }
    }

    private func addObserver(_ handler: @escaping @MainActor (Event) -> Void, finish: @escaping () -> Void) -> Observation {
        let id = observers.add((handler, finish))
        return Observation { [weak self] in self?.observers.remove(id) }
    }

    func emit(_ event: Event) {
        // Looked up again for each: a handler may cancel an observation that comes later.
        for id in observers.ids { observers[id]?.handler(event) }
    }

    private func finishObservers() {
        for observer in observers.removeAll() { observer.finish() }
    }

    // MARK: Launch

    /// Starts the launch and returns at once.
    ///
    /// The store attaches in the background.
    ///
    /// Subscribes to the key-availability events first, atomically with reading the current state, so an
    /// unlock that happens while the attach runs is never missed. A controller launches once: launching again
    /// does nothing, and launching after ``terminate()`` does nothing but log a warning (`protected-store.launch`)
    /// — a terminated controller starts nothing; make a new one.
    public func launch(_ options: LaunchOptions = LaunchOptions()) {
        guard case .notLaunched = machine.state else {
            if case .terminated = phase { logger.warning("launch after terminate: a terminated controller starts nothing") }
            return
        }
        logger.debug(
            "launching",
            metadata: [
                "reason": "\(options.reason.rawValue)", "background": "\(options.inBackground)",
                "store": "\(configuration.store.path)", "class": "\(configuration.store.protectionClass)",
            ])
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

    /// Closes the store as the app terminates.
    ///
    /// It closes the store, cancels what waits and ends the event sequences, and returns once all of that
    /// has happened.
    ///
    /// The phase is ``Phase/terminated`` at once and nothing new starts; what was already under way is awaited:
    /// the operation running now (it runs to its end), an attach in flight (its store is closed as soon as it
    /// opens), the inbox merge, and the close itself — the writer and every reader closed, the store's key
    /// wiped, the store's threads ended. When this returns, the store's files may be copied, moved or opened by
    /// another process.
    /// Operations still waiting end as cancelled: ``perform(_:deadline:_:)`` throws
    /// `StoreError.Code.terminated`, as ``read(_:)`` does. Terminating twice waits the same way and changes
    /// nothing more.
    ///
    /// From code that cannot wait (a synchronous termination callback), `Task { await controller.terminate() }`
    /// starts it at once all the same: the phase changes before the task's first suspension.
    public func terminate() async {
        if case .terminated = phase {} else {
            logger.debug("terminating")
            apply(.terminate)
            subscription?.cancel()
            subscription = nil
            finishObservers()
        }
        await work.waitUntilIdle()
    }

    /// Acts as if the app's process were killed.
    ///
    /// Simulation only. Nothing is cleaned up: the store is neither checkpointed nor closed, and queued
    /// operations never end. The controller reacts to nothing again.
    package func abandon() {
        apply(.abandon)
        subscription?.cancel()
        subscription = nil
        deadlineTimer?.work.cancel()
        stopInboxPoll()
        _ = observers.removeAll()
    }

    /// Frees what the kernel frees of a killed process.
    ///
    /// Simulation only. That is its memory, with the store key and the inbox private key in it, and its
    /// threads. Call after ``abandon()`` and after the files the process had open were made dead
    /// (`SimulatedDisk.killOpenHandles()`). The store is closed, and since no handle of it takes a write or a
    /// lock any more, the close writes nothing (no checkpoint, no log removed), and the files stay as the
    /// killed process left them. Without it a long simulation keeps every crashed app's keys and threads, and
    /// runs out of memory mappings.
    package func releaseAbandonedStore() async {
        guard let store = machine.takeAbandonedStore() else { return }
        await store.close()
    }

    /// Returns once every event, attach, drain and close the controller started has finished (an attach
    /// delayed by the simulation's attach delay does not count until its time comes).
    ///
    /// For tests and benchmarks, which must know that everything the last step started has ended; an app
    /// follows ``phases()`` or ``events()`` instead.
    @_spi(Testing)
    public func waitUntilIdle() async {
        await work.waitUntilIdle()
    }

    // MARK: Operations

    /// Submits a UI-facing operation.
    ///
    /// It runs on the main actor with the store once setup has completed (at once if it has), in submission
    /// order, exactly once.
    ///
    /// - Parameters:
    ///   - name: a name for the app's own logs and for tests; ProtectedStore logs only the ticket's id, since a
    ///     name may hold the app's data.
    ///   - deadline: how long it may wait; past it, the operation ends as ``OperationOutcome/expired``.
    ///   - body: the operation.
    /// - Returns: its ticket, to cancel it or await its outcome.
    /// - Throws: `StoreError.Code.queueFull` when the queue is at its capacity, `StoreError.Code.terminated`
    ///   after ``terminate()``: the operation was not queued.
    @discardableResult
    public func submit(_ name: String, deadline: Duration? = nil, _ body: @escaping StoreOperation) throws -> OperationTicket {
        try refuseAfterTerminate()
        let due = deadline.map { clock.now + $0 }
        let ticket = try gate.enqueue(name: name, deadline: due, body: body)
        logger.trace("operation submitted", metadata: ["id": "\(ticket.id)", "waiting": "\(gate.count)"])
        if let due { scheduleExpiry(at: due) }
        apply(.operationSubmitted)
        return ticket
    }

    /// Runs `body` now if the store is ready, or when it becomes ready, and returns its result.
    ///
    /// Cancelling the calling task while the operation waits removes it from the queue: it never runs, and
    /// this throws `CancellationError`. Once it has started, it runs to its end.
    ///
    /// - Parameters:
    ///   - name: a name for the app's own logs and for tests; ProtectedStore logs only the ticket's id, since a
    ///     name may hold the app's data.
    ///   - deadline: how long it may wait for protected data.
    ///   - body: the operation, on the main actor, with the attached store.
    /// - Returns: what `body` returned.
    /// - Throws: exactly what `body` threw, unchanged; `CancellationError` when the task was cancelled before
    ///   it ran; a `StoreError` with `StoreError.Code.queueFull`, `StoreError.Code.deadlineExceeded`,
    ///   `StoreError.Code.terminated` (the app terminated before it ran), `StoreError.Code.cancelled`
    ///   (``cancel(_:)`` was called on its ticket), or the attach's
    ///   error when the store failed.
    @discardableResult
    public func perform<Result: Sendable>(
        _ name: String, deadline: Duration? = nil, _ body: @escaping @MainActor (StoreCoordinator) async throws -> Result
    ) async throws -> Result {
        try Task.checkCancellation()
        var result: Result?
        let ticket = try submit(name, deadline: deadline) { coordinator in result = try await body(coordinator) }
        let outcome = await withTaskCancellationHandler {
            await ticket.result()
        } onCancel: {
            ticket.requestCancellation()
            Task { @MainActor [weak self] in self?.cancel(ticket) }
        }
        switch outcome {
        case .completed:
            guard let result else { preconditionFailure("operation \(ticket.id) completed without a result") }
            return result
        case .failed(let error): throw error
        case .cancelled:
            if ticket.isCancellationRequested { throw CancellationError() }
            // Cancelled by the app's termination: the same word ``read(_:)`` says for the same cause.
            if case .terminated = phase { throw StoreError.terminated() }
            throw StoreError.cancelled()
        case .expired: throw StoreError.deadlineExceeded()
        }
    }

    /// Cancels a waiting operation.
    ///
    /// - Returns: `false` when it already ran, runs now, or ended.
    @discardableResult
    public func cancel(_ ticket: OperationTicket) -> Bool {
        gate.cancel(ticket)
    }

    private func scheduleExpiry(at deadline: Timekeeper.Instant) {
        if let current = deadlineTimer, current.deadline <= deadline { return }
        deadlineTimer?.work.cancel()
        let work = self.work
        deadlineTimer = (
            deadline,
            clock.schedule(at: deadline) { [weak self] in
                work.begin()
                Task { @MainActor in
                    self?.expireOverdue()
                    work.end()
                }
            }
        )
    }

    private func expireOverdue() {
        deadlineTimer = nil
        if case .abandoned = machine.state { return }
        gate.expireOverdue(now: clock.now)
        if let next = gate.earliestDeadline { scheduleExpiry(at: next) }
    }

    // MARK: Interpreting the state machine

    private func handle(_ event: ProtectedDataEvent) {
        switch event {
        case .willBecomeUnavailable: apply(.protectedDataWillBecomeUnavailable)
        case .didBecomeAvailable: apply(.protectedDataDidBecomeAvailable)
        case .didBecomeUnavailable:
            apply(.protectedDataDidBecomeUnavailable)
            if storeKeysDestroyed { apply(.storeKeysDestroyed) }
        }
    }

    /// Whether the keys the store was opened with are gone for good.
    ///
    /// The key source says it erased them; they are not merely locked away. A class B, C or D store stays
    /// open through a lock, and through the loss of a device agent, which cannot tell.
    private var storeKeysDestroyed: Bool {
        configuration.store.protectionClass != .complete && keys.hasErasedKeys
    }

    private func apply(_ event: LaunchEvent<StoreCoordinator>) {
        let before = phase
        let effects = machine.handle(event)
        if phase != before {
            logger.debug("phase changed", metadata: ["from": "\(before)", "to": "\(phase)", "event": "\(event.logName)"])
            if phase == .ready { startInboxPoll() } else { stopInboxPoll() }
            emit(.phaseChanged(phase))
        }
        for effect in effects { perform(effect) }
    }

    private func perform(_ effect: LaunchEffect<StoreCoordinator>) {
        switch effect {
        case .attachStore(let attempt): startAttach(attempt)
        case .closeStore(let store): close(store)
        case .drainQueue: startDrain()
        case .failQueue(let error): gate.finishAll(.failed(error))
        case .cancelQueue: gate.finishAll(.cancelled)
        case .presentError(let error): emit(.errorPresented(error))
        case .enableInteraction, .disableInteraction: break  // the machine holds the flag; the UI reads it
        }
    }

    private func startAttach(_ attempt: Int) {
        guard configuration.attachDelay > .zero else { return beginAttach(attempt) }
        let work = self.work
        clock.schedule(at: clock.now + configuration.attachDelay) { [weak self] in
            work.begin()
            Task { @MainActor in
                self?.beginAttach(attempt)
                work.end()
            }
        }
    }

    private func beginAttach(_ attempt: Int) {
        // A delayed attach whose launch was abandoned, terminated or superseded meanwhile does not start.
        guard machine.pendingAttempt == attempt else { return }
        let store = configuration.store
        let keys = self.keys
        let logger = self.logger
        logger.debug("attaching the store", metadata: ["attempt": "\(attempt)"])
        work.begin()
        Task.detached(priority: .userInitiated) { [weak self, work] in
            let event: LaunchEvent<StoreCoordinator>
            do {
                event = .attachSucceeded(try await StoreCoordinator.attach(store, keys: keys), attempt: attempt)
            } catch {
                // The key source says why, in the error itself: "unavailable" (a locked key, or no class key
                // to make one with) means wait for the event; anything else is a real failure.
                let failure = StoreError(wrapping: error)
                let unavailable = failure.code == .protectedDataUnavailable
                event = .attachFailed(unavailable ? .protectedDataUnavailable : .error(failure), attempt: attempt)
                logger.debug(
                    unavailable ? "attach waits: protected data unavailable" : "attach failed",
                    metadata: ["attempt": "\(attempt)", "code": "\(failure.code)"])
            }
            let delivered = await self?.attachFinished(event) != nil
            if case .attachSucceeded(let coordinator, _) = event {
                if delivered {
                    // `ready` is out; the reader the attach opens in the background still counts as work in flight.
                    await coordinator.waitUntilFirstReaderOpened()
                } else {
                    // The controller went away during the attach: nobody holds the store, so it closes now.
                    await coordinator.close()
                }
            }
            work.end()
        }
    }

    private func attachFinished(_ event: LaunchEvent<StoreCoordinator>) {
        // The attach merged the locked inbox into the store whether or not the store is kept: say so.
        if case .attachSucceeded(let attached, _) = event { reportInbox(attached.inboxReportAtAttach) }
        apply(event)
    }

    /// Closes a coordinator on its writer's thread.
    ///
    /// ``waitUntilIdle()`` (and ``terminate()``) waits for it and for the store's threads to end.
    private func close(_ closing: StoreCoordinator) {
        if configuration.plantedFault == .keepCoordinatorAfterClose { plantedStaleCoordinator = closing }
        // At terminate the app closed it; otherwise protected data became unavailable (a lock, erased keys).
        let reason: StoreCloseReason = if case .terminated = phase { .closedByApp } else { .protectedDataUnavailable }
        work.begin()
        Self.close(closing, reason: reason, then: work.end)
    }

    /// Closes `store` on its writer's thread, after the work already queued there, and waits for its threads.
    private nonisolated static func close(
        _ store: StoreCoordinator, reason: StoreCloseReason, then done: @escaping @Sendable () -> Void = {}
    ) {
        Task.detached {
            await store.close(reason)
            done()
        }
    }

    /// Throws `StoreError.Code.terminated` once the controller terminated.
    ///
    /// After ``terminate()`` nothing starts.
    func refuseAfterTerminate() throws {
        if case .terminated = phase { throw StoreError.terminated() }
    }

    private func startDrain() {
        guard !isDraining else { return }
        isDraining = true
        work.begin()
        Task { [weak self, work] in
            await self?.drain()
            self?.isDraining = false
            work.end()
        }
    }

    /// Runs waiting operations in order while the store is ready.
    ///
    /// An operation taken from the queue ends exactly once. If the store closes while it runs, it fails; it is
    /// never put back.
    private func drain() async {
        while let coordinator = machine.store, let entry = gate.next(now: clock.now) {
            logger.trace("operation running", metadata: ["id": "\(entry.ticket.id)"])
            do {
                try await entry.body(coordinator)
                gate.finish(entry.ticket, .completed)
            } catch {
                gate.finish(entry.ticket, .failed(error))
            }
        }
    }
}
