internal import CSystemd
internal import Logging
public import ProtectedData
import SecureKeys
import StoreConcurrency
#if canImport(Glibc)
import Glibc
#endif

/// Follows the user's session lock through systemd-logind (sd-bus), and reports every lock, unlock and sleep.
///
/// At start it finds the session (``LogindSession/Lookup``), subscribes to its `PropertiesChanged`, `Lock`,
/// `Unlock` and the manager's `PrepareForSleep`, then reads `LockedHint`; on a session bus it also follows
/// `org.gnome.ScreenSaver` and `org.freedesktop.ScreenSaver` `ActiveChanged` — the fallback for lockers that
/// never set `LockedHint` (some wlroots lockers). A dedicated thread runs an `sd_event` loop with the buses
/// attached to it (`sd_bus_attach_event`) and an `eventfd` that ``stop()`` writes; ``stop()`` joins it and
/// closes the buses.
///
/// What it trusts: signals are matched with `sender='org.freedesktop.login1'`, which the bus daemon resolves
/// to logind's connection, and `LockedHint` is always re-read from logind rather than taken from a change's
/// payload. A `PropertiesChanged` that names `LockedHint` with `LockedHint` now `true` is always a lock, whatever
/// was read before: the device may have been unlocked with its passcode since. It follows who owns
/// `org.freedesktop.login1` (`NameOwnerChanged`): logind leaving the bus is a lock, and when it is back the
/// session's `LockedHint` is read afresh and followed. Whatever it trusts, it can only ever report a lock: a
/// spoofed lock costs availability, never confidentiality, because nothing it reports brings keys back.
public final class SessionLockSource: Sendable {
    /// What the source knows now.
    public struct Status: Sendable, Hashable {
        /// The bus logind was found on.
        public var systemBus: Bus
        /// The session followed.
        public var session: LogindSession
        /// The session's `LockedHint`, as last read from logind.
        public var lockedHint: Bool
        /// Whether `LockedHint` has been seen `true` since the start.
        ///
        /// It is `false` on a desktop whose locker never sets it, where only the screen saver signals tell.
        public var lockedHintSeen: Bool
        /// The session bus of the screen-saver fallback, or `nil` when none was asked for.
        public var sessionBus: Bus?
        /// The screen saver found on the session bus (`org.gnome.ScreenSaver`), or why there is none.
        public var screenSaver: String
        /// Whether a screen saver said it is active (locked) last.
        public var screenSaverActive: Bool
        /// Whether the machine is between `PrepareForSleep(true)` and `(false)`.
        public var sleeping: Bool
        /// Whether systemd-logind owns its name on the bus.
        ///
        /// It is `false` from the moment it leaves (a lock) until it is back.
        public var logindRunning: Bool
        /// Whether the system bus is still connected.
        ///
        /// It is `false` once it is lost or the source is stopped.
        public var connected: Bool

        /// Whether the session is locked.
        ///
        /// It is locked when `LockedHint` says so, or a screen saver is active.
        public var isLocked: Bool { lockedHint || screenSaverActive }
    }

    private let watch: SessionWatch
    private let thread: LockedState<NamedThread?>

    /// Starts following the session.
    ///
    /// - Parameters:
    ///   - systemBus: where logind is: ``Bus/system`` in production; a test passes its private bus explicitly.
    ///   - sessionBus: where the screen-saver fallback listens (``Bus/session``), or `nil` for none. A session
    ///     bus that cannot be reached is not an error: ``Status/screenSaver`` says so.
    ///   - onEvent: called with each event, in order, on the source's thread; keep it quick. It is set before
    ///     the thread starts, so no event is missed.
    /// - Throws: `DeviceError.Code.noBus`, `DeviceError.Code.noLogind`, `DeviceError.Code.noSession`.
    public init(
        systemBus: Bus = .system, sessionBus: Bus? = .session,
        onEvent: @escaping @Sendable (SessionLockEvent) -> Void
    ) throws(DeviceError) {
        watch = try SessionWatch(systemBus: systemBus, sessionBus: sessionBus, emit: onEvent)
        do {
            thread = LockedState(try NamedThread(name: "PStore.session") { [watch] in watch.run() })
        } catch {
            watch.closeBeforeStart()
            throw DeviceError.noBus(systemBus, errno: error.errno)
        }
    }

    /// The session followed.
    public var session: LogindSession { watch.session }

    /// The fds the source opened, as they were at start.
    ///
    /// These are its buses' sockets, its wake eventfd and its event loop's epoll fd. For tests that check ``stop()``
    /// closes them.
    package var descriptors: [Int32] { watch.descriptors }

    /// What the source knows now.
    public var status: Status { watch.status }

    /// Stops the thread and closes the buses.
    ///
    /// The thread is joined, so it has ended when this returns. No event is reported after it returns. Stopping twice
    /// is harmless. Stopping from an event handler ends the thread after the handler returns, without waiting for it.
    public func stop() {
        guard let running = thread.withLock({ thread -> NamedThread? in
            defer { thread = nil }
            return thread
        }) else { return }
        watch.requestStop()
        // On its own thread (from an event handler) the thread is detached instead of joined.
        if running.join() { watch.closeWake() }
    }

    deinit { stop() }
}

/// The state a lock source shares between its thread and its callers.
private struct WatchState {
    var lockedHint = false
    var lockedHintSeen = false
    var screenSaver = "none asked for"
    var screenSaverActive = false
    var sleeping = false
    var logindRunning = true
    var systemConnected = true
    var sessionConnected = true
    var stopped = false
    var wakeClosed = false
}

/// The buses, matches and loop of a ``SessionLockSource``. Set up on the caller's thread, then used by the
/// loop thread only.
final class SessionWatch: @unchecked Sendable {
    // @unchecked Sendable: the connections and handlers are set up in `init`, then used only by the loop
    // thread (started after `init`, joined before anyone else touches them); shared state is in `state`.
    let session: LogindSession
    private let systemBus: Bus
    private let sessionBusAddress: Bus?
    private let system: BusConnection
    private var sessionConnection: BusConnection?
    private var handlers: [SignalHandler] = []
    private let state = LockedState(WatchState())
    private let emit: @Sendable (SessionLockEvent) -> Void
    /// Written by ``requestStop()`` to wake the loop.
    private let wake: Int32
    /// The `sd_event` loop the buses are attached to.
    ///
    /// It is freed by the loop thread when it ends, or by ``closeBeforeStart()``.
    private var event: OpaquePointer?
    /// The loop's source for ``wake``.
    private var wakeSource: OpaquePointer?
    private let logger = LogSubsystem.session.makeLogger()
    /// The fds opened in `init`, read there (on the setting-up thread, before the loop starts).
    private(set) var descriptors: [Int32] = []

    init(systemBus: Bus, sessionBus: Bus?, emit: @escaping @Sendable (SessionLockEvent) -> Void) throws(DeviceError) {
        self.systemBus = systemBus
        self.sessionBusAddress = sessionBus
        self.emit = emit
        system = try BusConnection(systemBus)
        session = try LogindSession.find(on: system)
        let wake = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard wake >= 0 else { throw DeviceError.noBus(systemBus, errno: errno) }
        // Every property is set from here on: a throw below runs `deinit`, which closes it.
        self.wake = wake
        try subscribeToLogind()
        if let sessionBus { openScreenSaverFallback(sessionBus) }
        try makeEventLoop()
        descriptors = [system, sessionConnection].compactMap { $0?.fd } + [wake] + [event.map(sd_event_get_fd)].compactMap { $0 }
        logger.debug(
            "following the session", metadata: ["session": "\(session.id)", "found": "\(session.lookup)", "bus": "\(systemBus)"])
    }

    var status: SessionLockSource.Status {
        state.withLock { state in
            .init(
                systemBus: systemBus, session: session, lockedHint: state.lockedHint, lockedHintSeen: state.lockedHintSeen,
                sessionBus: sessionBusAddress, screenSaver: state.screenSaver, screenSaverActive: state.screenSaverActive,
                sleeping: state.sleeping, logindRunning: state.logindRunning, connected: state.systemConnected)
        }
    }

    // MARK: Setting up

    /// Subscribes to logind, then reads its state.
    ///
    /// A change between the two is seen twice, never missed (swayidle's order).
    private func subscribeToLogind() throws(DeviceError) {
        let service = LogindSession.service
        let path = session.path
        let rules: [(String, (BusMessage) -> Void)] = [
            (
                "type='signal',sender='\(service)',path='\(path)',interface='org.freedesktop.DBus.Properties',"
                    + "member='PropertiesChanged',arg0='\(LogindSession.sessionInterface)'",
                { [unowned self] message in
                    // A payload that cannot be read is taken as naming LockedHint: a lock is never missed.
                    rereadLockedHint(announced: (try? message.announcedProperties())?.contains("LockedHint") ?? true)
                }
            ),
            (
                "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',interface='org.freedesktop.DBus',"
                    + "member='NameOwnerChanged',arg0='\(service)'",
                { [unowned self] message in
                    guard (try? message.readString()) != nil, (try? message.readString()) != nil,
                        let owner = try? message.readString()
                    else { return }
                    logindOwnerChanged(to: owner)
                }
            ),
            (
                "type='signal',sender='\(service)',path='\(path)',interface='\(LogindSession.sessionInterface)',member='Lock'",
                { [unowned self] _ in report(.locked(.sessionSignal)) }
            ),
            (
                "type='signal',sender='\(service)',path='\(path)',interface='\(LogindSession.sessionInterface)',member='Unlock'",
                { [unowned self] _ in report(.unlocked(.sessionSignal)) }
            ),
            (
                "type='signal',sender='\(service)',path='\(LogindSession.managerPath)',"
                    + "interface='\(LogindSession.managerInterface)',member='PrepareForSleep'",
                { [unowned self] message in
                    guard let sleeping = try? message.readBool() else { return }
                    state.withLock { $0.sleeping = sleeping }
                    report(sleeping ? .sleeping : .resumed)
                }
            ),
            (Self.disconnectedRule, { [unowned self] _ in lost(system: true) }),
        ]
        do throws(BusFailure) {
            for (rule, handle) in rules {
                let handler = SignalHandler(handle)
                handlers.append(handler)
                try system.addMatch(rule, handler)
            }
            let locked = try system.boolProperty(service, path, LogindSession.sessionInterface, "LockedHint")
            state.withLock {
                $0.lockedHint = locked
                $0.lockedHintSeen = locked
            }
        } catch let failure {
            if failure.isServiceMissing { throw DeviceError.noLogind(systemBus, failure) }
            throw DeviceError.noSession(
                uid: getuid(), pid: getpid(), "the session \(session.id) (\(path)) cannot be followed: \(failure)")
        }
    }

    /// sd-bus's own signal when a connection drops.
    private static let disconnectedRule =
        "type='signal',sender='org.freedesktop.DBus.Local',path='/org/freedesktop/DBus/Local',"
        + "interface='org.freedesktop.DBus.Local',member='Disconnected'"

    /// Subscribes to the screen savers' `ActiveChanged` on the session bus.
    ///
    /// Best effort: a missing bus or screen saver is said in the status, not thrown.
    private func openScreenSaverFallback(_ bus: Bus) {
        let connection: BusConnection
        do {
            connection = try BusConnection(bus)
        } catch {
            state.withLock { $0.screenSaver = "no session bus: \(error.message)" }
            return
        }
        let savers: [(name: String, path: String, signal: SessionLockSignal)] = [
            ("org.gnome.ScreenSaver", "/org/gnome/ScreenSaver", .gnomeScreenSaver),
            ("org.freedesktop.ScreenSaver", "/org/freedesktop/ScreenSaver", .freedesktopScreenSaver),
        ]
        var found: [String] = []
        var active = false
        do throws(BusFailure) {
            for saver in savers {
                let handler = SignalHandler { [unowned self] message in
                    guard let isActive = try? message.readBool() else { return }
                    state.withLock { $0.screenSaverActive = isActive }
                    report(isActive ? .locked(saver.signal) : .unlocked(saver.signal))
                }
                handlers.append(handler)
                try connection.addMatch(
                    "type='signal',sender='\(saver.name)',interface='\(saver.name)',member='ActiveChanged'", handler)
            }
            let handler = SignalHandler { [unowned self] _ in lost(system: false) }
            handlers.append(handler)
            try connection.addMatch(Self.disconnectedRule, handler)
        } catch {
            state.withLock { $0.screenSaver = "cannot follow the screen savers on the \(bus): \(error)" }
            return
        }
        for saver in savers {
            guard let reply = try? connection.call(saver.name, saver.path, saver.name, "GetActive") else { continue }
            let isActive = (try? reply.readBool()) ?? false
            active = active || isActive
            found.append("\(saver.name) (\(isActive ? "active" : "inactive"))")
        }
        state.withLock {
            $0.screenSaver = found.isEmpty ? "none running on the \(bus) (its ActiveChanged is still followed)" : found.joined(separator: ", ")
            $0.screenSaverActive = active
        }
        sessionConnection = connection
    }

    /// Makes the `sd_event` loop the thread runs.
    ///
    /// Both buses are attached to it (sd-bus then processes them and keeps their timeouts), and the wake eventfd as an
    /// I/O source that only wakes the loop.
    private func makeEventLoop() throws(DeviceError) {
        var made: OpaquePointer?
        var result = sd_event_new(&made)
        guard result >= 0, let made else { throw DeviceError.noBus(systemBus, errno: -result) }
        event = made
        for connection in [system, sessionConnection].compactMap({ $0 }) {
            result = connection.attach(to: made)
            guard result >= 0 else { throw DeviceError.noBus(connection.bus, errno: -result) }
        }
        var source: OpaquePointer?
        result = sd_event_add_io(made, &source, wake, UInt32(EPOLLIN.rawValue), { _, fd, _, _ in
            var count: UInt64 = 0
            _ = read(fd, &count, 8)
            return 0
        }, nil)
        guard result >= 0 else { throw DeviceError.noBus(systemBus, errno: -result) }
        wakeSource = source
    }

    /// Closes the buses and frees the event loop.
    ///
    /// This is the end of the thread, or what `init` opened when the thread could not start (or a throw in `init`,
    /// through `deinit`). Closing twice is harmless.
    private func closeBusesAndLoop() {
        system.close()
        sessionConnection?.close()
        sessionConnection = nil
        if let wakeSource { sd_event_source_disable_unref(wakeSource) }
        wakeSource = nil
        if let event { sd_event_unref(event) }
        event = nil
    }

    /// Closes what `init` opened when the thread could not start.
    func closeBeforeStart() {
        closeBusesAndLoop()
    }

    /// Closes the wake fd, once the thread has been joined (nothing polls it any more).
    ///
    /// Closing twice is harmless. `deinit` closes it if nothing did.
    func closeWake() {
        state.withLock { state in
            guard !state.wakeClosed else { return }
            state.wakeClosed = true
            close(wake)
        }
    }

    deinit {
        closeBusesAndLoop()
        closeWake()
    }

    // MARK: Events

    /// Handles logind leaving the bus or coming back.
    ///
    /// logind left the bus (`owner` empty), which is a lock. Or it is back, and the session's state is read afresh.
    private func logindOwnerChanged(to owner: String) {
        let running = !owner.isEmpty
        state.withLock { $0.logindRunning = running }
        if running {
            rereadLockedHint(announced: true, afresh: true)
        } else {
            report(.locked(.logindGone))
        }
    }

    /// Reads `LockedHint` from logind and reports what changed.
    ///
    /// It reports a change from what was read last, and a lock whenever the value read is `true` and `announced` (a
    /// signal named `LockedHint`). With `afresh`, when logind is back, it reports the value read, whatever was read
    /// before.
    private func rereadLockedHint(announced: Bool, afresh: Bool = false) {
        let reading = Result { () throws(BusFailure) -> Bool in
            try system.boolProperty(LogindSession.service, session.path, LogindSession.sessionInterface, "LockedHint")
        }
        switch reading {
        case .success(let locked):
            let changed = state.withLock { state -> Bool in
                defer {
                    state.lockedHint = locked
                    state.lockedHintSeen = state.lockedHintSeen || locked
                }
                return state.lockedHint != locked
            }
            let signal: SessionLockSignal = afresh ? .logindReturned : .lockedHint
            if locked && (changed || announced) {
                report(.locked(signal))
            } else if !locked && (changed || afresh) {
                report(.unlocked(signal))
            }
        case .failure(let failure):
            logger.debug("LockedHint unreadable", metadata: ["error": "\(failure)"])
            report(.locked(.lockedHintUnreadable))
        }
    }

    private func lost(system isSystem: Bool) {
        let first = state.withLock { state -> Bool in
            if isSystem {
                defer { state.systemConnected = false }
                return state.systemConnected
            }
            defer { state.sessionConnected = false }
            return state.sessionConnected
        }
        guard first else { return }
        if isSystem {
            report(.busLost("\(systemBus)"))
        } else {
            state.withLock { $0.screenSaver = "lost the session bus" }
            logger.debug("lost the session bus: the screen-saver fallback is gone")
        }
    }

    private func report(_ event: SessionLockEvent) {
        guard !state.withLock({ $0.stopped }) else { return }
        logger.debug("session event", metadata: ["event": "\(event)"])
        emit(event)
    }

    // MARK: The loop

    func requestStop() {
        state.withLock { state in
            state.stopped = true
            guard !state.wakeClosed else { return }
            var one: UInt64 = 1
            _ = write(wake, &one, 8)
        }
    }

    /// Runs the event loop one iteration at a time until stopped.
    ///
    /// Each iteration dispatches what is ready on the buses or the wake fd, waiting until something is. It reports a
    /// bus that closed.
    func run() {
        while !state.withLock({ $0.stopped }), let event {
            // An error (EINTR) only goes round again: the loop ends when asked to.
            _ = sd_event_run(event, .max)
            if !system.isOpen { lost(system: true) }
            if let connection = sessionConnection, !connection.isOpen { lost(system: false) }
        }
        closeBusesAndLoop()
        handlers.removeAll()
        state.withLock {
            $0.systemConnected = false
            $0.sessionConnected = false
        }
    }
}
