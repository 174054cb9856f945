import Foundation
import Glibc
internal import Logging
public import SecureKeys
import StoreConcurrency
import SystemPackage

/// The one process that owns a state directory's device and answers every other process over a Unix-domain socket.
///
/// It holds the keybag, passcode attempts and delays, grace timer, and class keys in guarded memory. It answers as a
/// phone's keybag service answers an app, its extensions and its widgets.
///
/// Clients (``DeviceAgentClient``) find the socket from the state directory alone: at ``socketPath(in:)``, or —
/// for an agent given a ``Configuration/runtimeDirectory`` — where the state directory's `agent/socket-location`
/// says (`AgentSocketLocation`). It is mode 0600 in a 0700 directory, and the agent also checks each peer's user
/// id with `SO_PEERCRED`. They ask for the device's state, lock,
/// unlock (a wrong passcode counts whoever sent it), and a store's key — given only while the store's class
/// is available; class keys never leave the agent. Every protected-data event is pushed to every client.
///
/// The agent takes the state directory's ``StateDirectoryLock`` for its whole life, so no process can write
/// the device state beside it. Bad clients are refused and cut off, never served at the cost of others: a
/// peer of another user, more than ``Configuration/maximumClients`` at once, a frame over 64 KiB or not
/// well formed, no `hello` or a request not whole within ``Configuration/requestTimeout``, a client that
/// stops reading what the agent sends (an answer or an event finds its socket's buffer full: nothing the agent
/// sends ever waits for a client). The device state is on disk after every change, so killing the agent
/// loses nothing: the next agent (or a lone process) boots from it, before the first unlock.
public final class DeviceAgent: Sendable {
    /// How an agent serves.
    public struct Configuration: Sendable {
        /// The Argon2id cost for a device set up through the agent.
        public var kdf: PasscodeKDF
        /// Clients served at once (1 to 4096).
        ///
        /// One more is refused with `agent-refused` until one leaves.
        public var maximumClients: Int
        /// How long a client may wait before its `hello`, and a request may take to arrive whole (1 ms to a day).
        ///
        /// The first is how long a new client may wait before it begins its `hello`. The second is how long a request
        /// (`hello` included) may take to arrive whole once its first byte has. A client that stays silent, stalls or
        /// dies part-way is cut off then.
        public var requestTimeout: Duration
        /// Where the device keeps its key.
        ///
        /// It is a file (the default) or a TPM (`TPMKeys`).
        public var keyStore: any DeviceKeyStore
        /// Whether the device runs on the real clock (`ContinuousClock`).
        ///
        /// If so, its grace periods end in real time, and clients may not move its clock (`device serve --session`). If
        /// `false`, a virtual clock that clients' `advanceClock` moves, so scripts in several processes agree.
        public var realClock: Bool
        /// The user's runtime directory (`$XDG_RUNTIME_DIR`) to listen in, instead of the state directory.
        ///
        /// The socket is `protected-store/device-DEV-INODE.sock` there (a short path, whatever the state directory's),
        /// and the state directory's `agent/socket-location` names it for clients (`AgentSocketLocation`). If `nil`,
        /// `STATE-DIR/agent/device.sock`.
        public var runtimeDirectory: String?
        /// Whether something outside the clients holds the device locked now.
        ///
        /// This is the session's screen lock for `device serve --session`, asked when a device is set up through the
        /// agent. A device set up while it says so comes up locked with its class A keys and class B private key
        /// already wiped (no grace period, as nobody was using it unlocked). `nil` when nothing does.
        public var heldLocked: (@Sendable () -> Bool)?

        /// A configuration.
        ///
        /// Values outside their range are brought to its nearest end.
        ///
        /// - Parameters:
        ///   - kdf: the Argon2id cost for a device set up through the agent.
        ///   - maximumClients: clients served at once (32).
        ///   - requestTimeout: how long before `hello` begins, and a request once begun, may take (5 s).
        ///   - keyStore: where the device keeps its key, at set-up and at every boot (the file store).
        ///   - realClock: whether the device runs on `ContinuousClock` instead of a clock clients move.
        ///   - runtimeDirectory: the user's runtime directory to listen in, or `nil` for the state directory.
        ///   - heldLocked: whether something outside the clients holds the device locked now, or `nil`.
        public init(
            kdf: PasscodeKDF = .default, maximumClients: Int = 32, requestTimeout: Duration = .seconds(5),
            keyStore: any DeviceKeyStore = FileDeviceKeyStore(), realClock: Bool = false,
            runtimeDirectory: String? = nil, heldLocked: (@Sendable () -> Bool)? = nil
        ) {
            self.runtimeDirectory = runtimeDirectory
            self.heldLocked = heldLocked
            self.keyStore = keyStore
            let timeouts = Duration.milliseconds(1)...Duration.seconds(24 * 3600)
            self.kdf = kdf
            self.maximumClients = min(max(maximumClients, 1), 4096)
            self.requestTimeout = min(max(requestTimeout, timeouts.lowerBound), timeouts.upperBound)
            self.realClock = realClock
        }
    }

    private struct State {
        var device: KeybagDevice?
        var subscription: EventSubscription?
        var connections: [Int: AgentConnection] = [:]
        var nextConnectionID = 0
        var stopped = false
    }

    /// The state directory the agent owns.
    public let stateDirectory: String
    /// Where clients connect.
    ///
    /// This is in the state directory, or in the runtime directory (``Configuration/runtimeDirectory``).
    public let socketPath: String
    /// The state directory's `agent/socket-location`, when the socket is in the runtime directory.
    private let socketLocationPath: String?
    private let configuration: Configuration
    private let ownership: StateDirectoryLock
    /// The device's virtual clock.
    ///
    /// Clients' `advanceClock` moves it, so scripts in several processes agree.
    private let clock = ManualClock()
    /// The clock the device runs on.
    ///
    /// This is ``clock``, or the real one (``Configuration/realClock``).
    private let deviceClock: any Clock<Duration>
    /// When the agent started, on the real clock.
    ///
    /// Its status's clock reads the time since.
    private let started = ContinuousClock.now
    private let listener: FileDescriptor
    /// The lock that lets one request at a time reach the device.
    ///
    /// The events it causes are sent to every client before its answer, so a client that asks for the status has seen
    /// every event that came before.
    private let serial = NSLock()
    private let state = LockedState(State())
    private let logger = LogSubsystem.device.makeLogger()

    /// Where the agent of `stateDirectory` listens when it has no ``Configuration/runtimeDirectory``.
    public static func socketPath(in stateDirectory: String) -> String {
        DeviceLayout(root: stateDirectory, fileSystem: .real).agentSocketPath
    }

    /// Takes the state directory, boots the device kept there (if any) and listens. Clients that connect
    /// before ``serve()`` runs wait in the socket's backlog.
    ///
    /// - Throws: `DeviceError.Code.stateInUse` when another process holds the directory (another agent, a
    ///   shell on its own), `DeviceError.Code.agentFailed` when the socket cannot be made (a path too long for
    ///   a socket address), `SecureKeysError` with `insecure-state-directory` when the runtime directory (or a
    ///   folder above it) is another user's or writable by others, and what booting the device throws.
    public init(stateDirectory: String, configuration: Configuration = Configuration()) throws {
        self.stateDirectory = stateDirectory
        self.configuration = configuration
        deviceClock = configuration.realClock ? ContinuousClock() : clock
        let layout = DeviceLayout(root: stateDirectory, fileSystem: .real)
        // Nothing is made before the socket's path is known to fit.
        if let runtime = configuration.runtimeDirectory {
            guard runtime.hasPrefix("/") else {
                throw DeviceError.agentFailed("the runtime directory \(runtime) is not an absolute path")
            }
            _ = try UnixSocket.address(AgentSocketLocation.longestRuntimeSocketPath(under: runtime))
            // This user's, writable by nobody else, under folders only root or this user can change
            // (invariant 10) — before anything is made in the state directory.
            try PrivateDirectory.check(runtime)
        } else {
            _ = try UnixSocket.address(layout.agentSocketPath)
        }
        try SecureFile.createDirectory(at: stateDirectory, in: .real)
        ownership = try StateDirectoryLock.acquire(stateDirectory, as: .deviceAgent)
        if SecureFile.exists(layout.statePath) {
            let device = try KeybagDevice(bootingFrom: stateDirectory, clock: deviceClock, keyStore: configuration.keyStore, ownership: ownership)
            state.withLock { $0.device = device }
        }
        try SecureFile.createDirectory(at: layout.agentDirectory, in: .real)
        // The directory's owner removes what a killed agent of the other kind left, so a client never finds a
        // stale entry before the live one.
        if let runtime = configuration.runtimeDirectory {
            let folder = SecureFile.folder(containing: AgentSocketLocation.longestRuntimeSocketPath(under: runtime))
            try SecureFile.createDirectory(at: folder, in: .real)
            let info: stat
            do throws(Errno) { info = try Stat(FilePath(stateDirectory), followTargetSymlink: false).rawValue } catch {
                throw SecureKeysError.io("cannot stat", path: stateDirectory, errno: error.rawValue)
            }
            socketPath = AgentSocketLocation.runtimeSocketPath(
                under: runtime, device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
            socketLocationPath = layout.agentSocketLocationPath
            try Self.removeStale(layout.agentSocketPath)
        } else {
            socketPath = layout.agentSocketPath
            socketLocationPath = nil
            try Self.removeStale(layout.agentSocketLocationPath)
        }
        listener = try UnixSocket.listen(at: socketPath, backlog: Int32(configuration.maximumClients))
        // Named once it listens: a client that reads the name finds the socket there (waiting in its backlog).
        if socketLocationPath != nil {
            do {
                try AgentSocketLocation.record(socketPath, in: layout)
            } catch {
                unlink(socketPath)
                throw error
            }
        }
        if let device = state.withLock({ $0.device }) { watch(device) }
    }

    /// Removes what a killed agent left at `path`.
    ///
    /// Nothing there is not an error. A plain `unlink`, not `DiskIO`'s, as neither entry is durable device state (the
    /// socket itself is removed the same way).
    ///
    /// - Throws: `SecureKeysError` with `io-error` naming the entry when it stays.
    private static func removeStale(_ path: String) throws {
        guard unlink(path) == 0 || errno == ENOENT else {
            throw SecureKeysError.io("cannot remove the stale", path: path, errno: errno)
        }
    }

    deinit {
        try? listener.close()
        state.withLock { $0.device?.powerOff() }
    }

    /// Accepts and serves clients, each on a thread of its own, until ``stop()``.
    public func serve() {
        while !state.withLock({ $0.stopped }) {
            let accepted = accept(listener.rawValue, nil, nil)
            guard accepted >= 0 else {
                if errno == EMFILE || errno == ENFILE { usleep(10_000) }  // out of descriptors: let clients leave
                continue
            }
            // Not inherited by a process this one starts (a test's child, an app's helper): a copy there would
            // keep a connection open that the agent closed.
            _ = fcntl(accepted, F_SETFD, FD_CLOEXEC)
            let descriptor = FileDescriptor(rawValue: accepted)
            if let refusal = admissionRefusal(descriptor) {
                logger.debug("client refused", metadata: ["reason": "\(refusal.message)"])
                // Out of guarded memory, the refusal is not sent: the closed connection says enough.
                if let frame = try? AgentWireFormat.encode(.failure(AgentFailure(refusal)), id: 0) {
                    _ = FrameChannel.send(frame, on: descriptor, within: .zero)
                }
                try? descriptor.close()
                continue
            }
            let connection = state.withLock { state -> AgentConnection? in
                guard !state.stopped else { return nil }  // stop() ran while this client was accepted
                state.nextConnectionID += 1
                let connection = AgentConnection(id: state.nextConnectionID, descriptor: descriptor)
                state.connections[connection.id] = connection
                return connection
            }
            guard let connection else {
                try? descriptor.close()
                return
            }
            do {
                // Released at once, so detached: the thread ends with the connection.
                _ = try NamedThread(name: "PStore.client") { [self] in talk(to: connection) }
            } catch {
                logger.debug("client refused", metadata: ["reason": "no thread to serve it (error \(error.errno))"])
                _ = state.withLock { $0.connections.removeValue(forKey: connection.id) }
                connection.close()
            }
        }
    }

    /// Stops accepting, removes the socket and cuts every client off.
    ///
    /// ``serve()`` returns. The device is powered off (its state is on disk) and the directory given up when the agent
    /// is freed.
    public func stop() {
        // Still the directory's owner: no other agent can have bound this path. Gone, it tells a client at once
        // that nobody serves here. Removed before anything can make serve() return (`stopped`, the listener's
        // shutdown), so it is gone when serve() has returned. Its name first: a client never follows it to nothing.
        if let socketLocationPath { unlink(socketLocationPath) }
        unlink(socketPath)
        let connections = state.withLock { state -> [AgentConnection] in
            state.stopped = true
            return Array(state.connections.values)
        }
        for connection in connections { connection.shutDown() }
        shutdown(listener.rawValue, Int32(SHUT_RDWR))
    }

    /// The number of clients connected now.
    public var clientCount: Int { state.withLock { $0.connections.count } }

    // MARK: Serving one client

    private func admissionRefusal(_ descriptor: FileDescriptor) -> DeviceError? {
        let own = geteuid()
        guard let peer = UnixSocket.peerUserID(descriptor) else { return .agentRefused("the peer's user cannot be read") }
        guard peer == own else { return .agentRefused("a process of user \(peer) may not use the device of user \(own)") }
        let count = state.withLock { $0.connections.count }
        guard count < configuration.maximumClients else {
            return .agentRefused(
                "\(count) client\(count == 1 ? " is" : "s are") connected, the most it serves at once; try again when one leaves")
        }
        return nil
    }

    private func talk(to connection: AgentConnection) {
        defer {
            _ = state.withLock { $0.connections.removeValue(forKey: connection.id) }
            connection.close()
        }
        var greeted = false
        while true {
            let body: SecureBytes
            let timeout = configuration.requestTimeout
            switch FrameChannel.receive(connection.descriptor, firstByteTimeout: greeted ? nil : timeout, timeout: timeout) {
            case .closed: return
            case .broken:
                // Said in case the client only stalled; one that is gone never reads it.
                return connection.refuse(
                    .agentRefused(greeted ? "the request did not arrive whole within \(timeout.spoken)" : "no hello within \(timeout.spoken)"))
            case .malformed(let malformed):
                return connection.refuse(.agentRefused("\(malformed.reason); the connection is closed"))
            case .body(let received): body = received
            }
            let frame: AgentWireFormat.RequestFrame
            do {
                frame = try body.withUnsafeBytes { try AgentWireFormat.decodeRequest($0) }
            } catch {
                return connection.refuse(.agentRefused("a malformed request: \(error); the connection is closed"))
            }
            body.wipe()
            defer { frame.request.wipeSecrets() }
            if !greeted {
                guard case .hello(let version, let name) = frame.request, version == AgentWireFormat.protocolVersion else {
                    return connection.refuse(
                        .agentRefused("the first request must be hello with protocol version \(AgentWireFormat.protocolVersion)"))
                }
                greeted = true
                logger.debug("client connected", metadata: ["client": "\(name)", "connection": "\(connection.id)"])
            }
            // Answered and sent in one turn: no event can be sent between them, so the state an answer carries is
            // never older than an event the client already has.
            let sent = serial.withLock {
                let reply = answer(frame.request)
                defer { if case .storeKey(.available(let key)) = reply { key.wipe() } }
                // Out of guarded memory for the answer: the connection ends, and the client reports the agent gone.
                guard let encoded = try? AgentWireFormat.encode(reply, id: frame.id) else { return false }
                return connection.send(encoded)
            }
            guard sent else { return }
        }
    }

    // MARK: The device

    private func answer(_ request: AgentRequest) -> AgentReply {
        do {
            switch request {
            case .hello, .status:
                break
            case .setUp(let passcode, let gracePeriod, let wipeAfterFailures, let allowsEmptyPasscode):
                // The device checks the settings and the passcode (DeviceRules), as for every other caller.
                guard state.withLock({ $0.device }) == nil else { throw DeviceError.deviceExists(at: stateDirectory) }
                let device = try KeybagDevice.setUp(
                    in: stateDirectory, passcode: passcode,
                    configuration: .init(
                        gracePeriod: gracePeriod, attemptPolicy: .init(wipeAfterFailures: wipeAfterFailures), kdf: configuration.kdf),
                    clock: deviceClock, keyStore: configuration.keyStore, ownership: ownership,
                    allowsEmptyPasscode: allowsEmptyPasscode)
                // Set up while the session is locked: locked at once, class A and B keys wiped before anyone sees
                // them (the session's state was updated before its lock event was sent, so a lock during the
                // set-up is seen here, or by the lockDevice() waiting for this turn).
                if configuration.heldLocked?() == true { device.lockWithoutGracePeriod() }
                state.withLock { $0.device = device }
                watch(device)
                // Classes C and D became available, whether or not the session holds A and B back.
                broadcast(.didBecomeAvailable)
            case .unlock(let passcode):
                try requireDevice().unlock(passcode: passcode)
            case .authenticate(let passcode):
                try requireDevice().authenticate(passcode: passcode)
            case .lock:
                try requireDevice().lock()
            case .changePasscode(let old, let new, let allowsEmptyPasscode):
                try requireDevice().changePasscode(from: old, to: new, allowsEmptyPasscode: allowsEmptyPasscode)
            case .lookUpStoreKey(let storePath):
                return .storeKey(try requireDevice().lookUpStoreKey(forStoreAt: storePath))
            case .createStoreKey(let storePath, let protectionClass):
                return .storeKey(.available(try requireDevice().createStoreKey(forStoreAt: storePath, protectionClass: protectionClass)))
            case .advanceClock(let duration):
                guard !configuration.realClock else {
                    throw DeviceError.agentRefused("the device runs on the real clock; it cannot be moved")
                }
                try DeviceRules.checkClockAdvance(by: duration, from: clock.now.offset)
                clock.advance(by: duration)
            case .reboot:
                let old = try requireDevice()
                let hadProtectedData = old.availability.availableClasses.count > 1
                state.withLock { $0.subscription = nil }
                old.powerOff()
                let device = try KeybagDevice(
                    bootingFrom: stateDirectory, clock: deviceClock, keyStore: configuration.keyStore, ownership: ownership)
                state.withLock { $0.device = device }
                watch(device)
                if hadProtectedData { broadcast(.didBecomeUnavailable) }
            }
            return .status(status())
        } catch {
            return .failure(AgentFailure(error))
        }
    }

    /// Locks the device, as a client's `lock` does, for a lock from outside the clients.
    ///
    /// This is the session's lock (`device serve --session`). Taken in turn with the clients' requests, so every client
    /// sees the events in order. Without a device, nothing happens.
    public func lockDevice() {
        serial.withLock { state.withLock { $0.device }?.lock() }
    }

    private func requireDevice() throws -> KeybagDevice {
        guard let device = state.withLock({ $0.device }) else {
            throw DeviceError(code: .noDevice, message: "no device is set up in \(stateDirectory); run `device setup` first")
        }
        return device
    }

    /// Sends every event of `device` to every client, with the state after it.
    private func watch(_ device: KeybagDevice) {
        let subscription = device.subscribe { [weak self] event in self?.broadcast(event) }.subscription
        state.withLock { $0.subscription = subscription }
    }

    private func broadcast(_ event: ProtectedDataEvent) {
        let connections = state.withLock { Array($0.connections.values) }
        // Out of guarded memory for the event: no client may miss it, so each connection ends instead.
        guard let frame = try? AgentWireFormat.encode(.event(event, status()), id: 0) else {
            for connection in connections { connection.shutDown() }
            return
        }
        logger.debug("event pushed", metadata: ["event": "\(event)", "clients": "\(connections.count)"])
        for connection in connections where !connection.send(frame) { connection.shutDown() }
    }

    private func status() -> DeviceAgentStatus {
        let device = state.withLock { $0.device }
        return DeviceAgentStatus(
            agentProcessID: getpid(), lockState: device?.lockState,
            availability: device?.availability ?? ProtectedDataAvailability(availableClasses: []),
            failedPasscodeAttempts: device?.failedPasscodeAttempts ?? 0,
            clock: configuration.realClock ? started.duration(to: .now) : clock.now.offset)
    }
}

/// One client's socket.
///
/// It sends from any thread (answers, pushed events) one frame at a time. It is closed only by the thread that reads
/// it, after which sends fail instead of reaching a reused descriptor.
private final class AgentConnection: Sendable {
    let id: Int
    let descriptor: FileDescriptor
    private let closed = LockedState(false)

    init(id: Int, descriptor: FileDescriptor) {
        self.id = id
        self.descriptor = descriptor
    }

    /// Sends a frame without ever waiting.
    ///
    /// It returns `false` when the client is gone or its socket's buffer is full. That is hundreds of frames it has not
    /// read, so it has stopped reading, and the agent, which sends inside its one-request-at-a-time turn, must not wait
    /// for it at the others' cost.
    func send(_ frame: SecureBytes) -> Bool {
        closed.withLock { closed in !closed && FrameChannel.send(frame, on: descriptor, within: .zero) }
    }

    /// Sends why the connection ends, if the client has room for it.
    ///
    /// Its reader then closes it.
    func refuse(_ error: DeviceError) {
        if let frame = try? AgentWireFormat.encode(.failure(AgentFailure(error)), id: 0) { _ = send(frame) }
    }

    /// Wakes the reader, which then closes the connection.
    func shutDown() {
        closed.withLock { closed in if !closed { _ = shutdown(descriptor.rawValue, Int32(SHUT_RDWR)) } }
    }

    func close() {
        closed.withLock { closed in
            guard !closed else { return }
            closed = true
            try? descriptor.close()
        }
    }
}

extension AgentRequest {
    /// Zeroes the passcodes the request carried, once it was answered.
    func wipeSecrets() {
        switch self {
        case .setUp(let passcode, _, _, _), .unlock(let passcode), .authenticate(let passcode): passcode.wipe()
        case .changePasscode(let old, let new, _):
            old.wipe()
            new.wipe()
        default: break
        }
    }
}
