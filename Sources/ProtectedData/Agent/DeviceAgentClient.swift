import Foundation
import Glibc
public import SecureKeys
import StoreConcurrency
import SystemPackage

/// A process's view of the device when a ``DeviceAgent`` owns it.
///
/// It is the same key-availability monitor and store-key provider a `DataController` takes, answered by the agent over
/// its socket.
///
/// Events the agent pushes are delivered in order, on the client's reader thread, to every subscriber. A
/// handler must not call this client and wait for its answer — the answer would arrive on that very thread —
/// so it hops elsewhere first, as `DataController`'s does.
/// Availability is what the agent last said; a store key is asked for each time, and is given only while
/// its class is available. When the agent goes away, every class becomes unavailable (a
/// *did become unavailable* event) and requests fail with `DeviceError.Code.agentDisconnected`.
public final class DeviceAgentClient: KeyAvailabilityMonitor, StoreKeyProvider {
    /// The state directory whose agent this client talks to.
    public let stateDirectory: String
    /// The agent's process id.
    public let agentProcessID: Int32
    private let link: AgentLink

    /// Connects to the agent of `stateDirectory`, if one is running.
    ///
    /// - Parameters:
    ///   - stateDirectory: the state directory the agent serves.
    ///   - clientName: a name for the agent's log (`app`, `extension`, …).
    /// - Returns: the client, or `nil` when no agent is running there (no socket, or a stale one).
    /// - Throws: `DeviceError.Code.untrustedAgent` when the process serving the socket runs as another user
    ///   (nothing is sent to it); `SecureKeysError` with `insecure-state-directory` when the state directory,
    ///   its `agent/` folder, or the folder of a socket in the runtime directory (or one above it) is another
    ///   user's or writable by others (checked before connecting); `DeviceError.Code.deviceStateDamaged` when
    ///   `agent/socket-location` names no socket path (`AgentSocketLocation`);
    ///   `DeviceError.Code.agentRefused` when the agent refuses this process (another user, too many
    ///   clients), `DeviceError.Code.agentDisconnected` when it goes away before it answers.
    public static func connect(toAgentOf stateDirectory: String, clientName: String) throws -> DeviceAgentClient? {
        // Only a socket in folders of this user's alone is one of its own agents (invariant 10)...
        guard let path = try AgentSocketLocation.find(in: stateDirectory) else { return nil }
        let descriptor: FileDescriptor
        switch try UnixSocket.connect(to: path) {
        case .success(let connected): descriptor = connected
        case .failure(let failure) where failure == .noSuchFileOrDirectory || failure == .connectionRefused: return nil
        case .failure(let failure): throw DeviceError.agentRefused("cannot connect to \(path): \(failure)")
        }
        // ...and the kernel says who listens, before a byte is sent: another user's process there (a socket
        // moved in, a folder once open to others) never sees a hello, let alone a passcode.
        let peer = UnixSocket.peerUserID(descriptor)
        guard peer == geteuid() else {
            try? descriptor.close()
            guard let peer else { throw DeviceError.agentRefused("the user of the process serving \(path) cannot be read; nothing was sent to it") }
            throw DeviceError.untrustedAgent(socket: path, user: PrivateDirectory.user(peer), you: PrivateDirectory.user(geteuid()))
        }
        let link = AgentLink(descriptor: descriptor, stateDirectory: stateDirectory)
        do {
            try link.start()
        } catch {
            try? descriptor.close()
            throw DeviceError.agentRefused("no thread to read the agent's answers on (error \(error.errno)); nothing was sent to it")
        }
        let status: DeviceAgentStatus
        do {
            let hello = AgentRequest.hello(protocolVersion: AgentWireFormat.protocolVersion, clientName: clientName)
            guard case .status(let greeted) = try link.request(hello, within: .seconds(10)) else {
                throw DeviceError.agentRefused("the agent answered hello with something else")
            }
            status = greeted
        } catch {
            link.shutDown()
            throw error
        }
        return DeviceAgentClient(stateDirectory: stateDirectory, agentProcessID: status.agentProcessID, link: link)
    }

    private init(stateDirectory: String, agentProcessID: Int32, link: AgentLink) {
        self.stateDirectory = stateDirectory
        self.agentProcessID = agentProcessID
        self.link = link
    }

    deinit { link.shutDown() }

    /// Ends the connection. Subscribers get *did become unavailable* if anything was available.
    public func disconnect() { link.shutDown() }

    /// Whether the connection to the agent is still up.
    public var isConnected: Bool { link.isConnected }

    // MARK: The device's state

    /// Asks the agent for the device's state. When it returns, every event the agent pushed before it has
    /// been delivered to this client's subscribers.
    public func status() throws -> DeviceAgentStatus {
        try link.requestStatus(.status)
    }

    /// The device's state as the agent last sent it (with an answer or an event), without asking.
    public var lastKnownStatus: DeviceAgentStatus { link.lastStatus }

    /// Whether the agent's device erased its keys, as its last status said.
    ///
    /// An agent that went away is not an erase, and stores of class B, C and D stay open then.
    public var hasErasedKeys: Bool { lastKnownStatus.lockState == .wiped }

    public func isProtectedDataAvailable(for protectionClass: ProtectionClass) -> Bool {
        link.lastStatus.availability.isAvailable(protectionClass)
    }

    public func subscribe(
        _ handler: @escaping @Sendable (ProtectedDataEvent) -> Void
    ) -> (availability: ProtectedDataAvailability, subscription: EventSubscription) {
        link.subscribe(handler)
    }

    // MARK: Asking the device

    /// Sets up a device in the agent's directory, which holds none yet.
    ///
    /// It is left unlocked.
    ///
    /// - Throws: `DeviceError.Code.deviceExists` when there is one; `SecureKeysError` with
    ///   `invalid-argument` for a grace period outside 0 to 100 years; `invalid-device-setting` for an empty
    ///   passcode unless `allowsEmptyPasscode`, or a setting outside the device's rules.
    public func setUp(
        passcode: SecureBytes, gracePeriod: Duration = .seconds(10), wipeAfterFailures: Int? = nil,
        allowsEmptyPasscode: Bool = false
    ) throws {
        let grace = try Self.checked(gracePeriod, "a grace period")
        _ = try link.requestStatus(
            .setUp(
                passcode: passcode, gracePeriod: grace, wipeAfterFailures: wipeAfterFailures,
                allowsEmptyPasscode: allowsEmptyPasscode))
    }

    /// Unlocks the device. A wrong passcode counts toward the delay and the wipe, whichever process sent it.
    ///
    /// - Throws: as `KeybagDevice.unlock(passcode:)`.
    public func unlock(passcode: SecureBytes) throws { _ = try link.requestStatus(.unlock(passcode: passcode)) }

    /// Checks the passcode as an unlock attempt even when the device is already unlocked.
    ///
    /// A wrong one counts toward the delay and the wipe, whichever process sent it. A right one unlocks a locked
    /// device.
    ///
    /// - Throws: as `KeybagDevice.authenticate(passcode:)`.
    public func authenticate(passcode: SecureBytes) throws { _ = try link.requestStatus(.authenticate(passcode: passcode)) }

    /// Locks the device.
    ///
    /// Every client gets *will become unavailable*.
    public func lock() throws { _ = try link.requestStatus(.lock) }

    /// Changes the passcode.
    ///
    /// - Throws: as `KeybagDevice.changePasscode(from:to:allowsEmptyPasscode:)`.
    public func changePasscode(from old: SecureBytes, to new: SecureBytes, allowsEmptyPasscode: Bool = false) throws {
        _ = try link.requestStatus(.changePasscode(old: old, new: new, allowsEmptyPasscode: allowsEmptyPasscode))
    }

    /// Moves the device's virtual clock (grace periods and passcode delays count on it).
    ///
    /// - Throws: `DeviceError.Code.clockLimit` for a step outside 0 to 100 years (checked here, before it is
    ///   sent) or past the device clock's end, 1,000 years (checked by the agent).
    public func advanceClock(by duration: Duration) throws {
        try DeviceRules.checkClockAdvance(by: duration, from: .zero)
        _ = try link.requestStatus(.advanceClock(try Self.checked(duration, "a clock advance")))
    }

    /// Powers the device off and boots it again, before the first unlock.
    public func reboot() throws { _ = try link.requestStatus(.reboot) }

    public func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup {
        guard case .storeKey(let lookup) = try link.request(.lookUpStoreKey(storePath: try Self.absolute(storePath))) else {
            throw DeviceError.agentRefused("the agent answered a store-key look-up with something else")
        }
        return lookup
    }

    public func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes {
        let reply = try link.request(.createStoreKey(storePath: try Self.absolute(storePath), protectionClass: protectionClass))
        guard case .storeKey(.available(let key)) = reply else {
            throw DeviceError.agentRefused("the agent answered a store-key creation with something else")
        }
        return key
    }

    /// What the device records of the store's key, or `nil` when it holds none.
    ///
    /// It is read here, from the header of the store's key file, which needs no class key and changes nothing. The
    /// agent writes it, and this process only reads it, as the user who owns the state directory.
    ///
    /// - Throws: `SecureKeysError` when the key file is damaged or not a regular file.
    public func storeKeyRecord(forStoreAt storePath: String) throws -> StoreKeyRecord? {
        try StoreKeyRecord.ofKeyFile(forStoreAt: storePath)
    }

    /// Makes `path` absolute, as the agent may run in another directory.
    ///
    /// A path the wire format cannot carry is refused here, for this call alone (the agent would take it for a broken
    /// client and close the connection).
    private static func absolute(_ path: String) throws -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        guard !absolute.utf8.contains(0), absolute.utf8.count <= 4096 else {
            throw SecureKeysError(code: .invalidArgument, message: "a store path of \(absolute.utf8.count) bytes or with a NUL byte cannot be sent to the device agent (at most 4096 bytes)")
        }
        return absolute
    }

    /// `duration` if the wire format carries it (0 to 100 years).
    ///
    /// This call alone is refused otherwise.
    private static func checked(_ duration: Duration, _ what: String) throws -> Duration {
        guard duration >= .zero, duration <= AgentWireFormat.maximumRequestDuration else {
            throw SecureKeysError(
                code: .invalidArgument,
                message: "\(what) \(duration < .zero ? "is negative" : "is over 100 years"): more than the device agent takes")
        }
        return duration
    }
}

/// The connection itself.
///
/// It sends requests out, matches answers to them by id, and passes events to the hub, on a reader thread that holds
/// this object (not the client), so the client can be released.
private final class AgentLink: @unchecked Sendable {
    // @unchecked Sendable: every `var` is read and written only while `condition` is locked.
    private let descriptor: FileDescriptor
    private let stateDirectory: String
    private let condition = NSCondition()
    private let sending = NSLock()
    private let hub = EventHub<ProtectedDataEvent>()
    private var answers: [UInt32: AgentReply] = [:]
    private var nextID: UInt32 = 0
    private var gone: DeviceError?
    private var status: DeviceAgentStatus
    private var shutDownOnce = false

    /// How long a request may wait for its answer.
    ///
    /// An unlock at the default Argon2id cost takes well under a second, so an agent this slow is stopped (Ctrl-Z) or
    /// stuck, and the connection is given up.
    private static let answerTimeout = Duration.seconds(30)

    init(descriptor: FileDescriptor, stateDirectory: String) {
        self.descriptor = descriptor
        self.stateDirectory = stateDirectory
        status = DeviceAgentStatus(
            agentProcessID: 0, lockState: nil, availability: ProtectedDataAvailability(availableClasses: []),
            failedPasscodeAttempts: 0, clock: .zero)
    }

    /// Starts the reader thread, which holds the link until the connection ends (released at once, so detached).
    ///
    /// - Throws: `NamedThread.StartFailure` when no thread can be started.
    func start() throws(NamedThread.StartFailure) {
        _ = try NamedThread(name: "PStore.link") { [self] in readUntilClosed() }
    }

    var isConnected: Bool { locked { gone == nil } }
    var lastStatus: DeviceAgentStatus { locked { status } }

    func subscribe(_ handler: @escaping @Sendable (ProtectedDataEvent) -> Void) -> (ProtectedDataAvailability, EventSubscription) {
        locked { (status.availability, hub.subscribe(handler)) }
    }

    func shutDown() {
        locked {
            guard !shutDownOnce else { return }
            shutDownOnce = true
            _ = shutdown(descriptor.rawValue, Int32(SHUT_RDWR))
        }
    }

    /// Sends `request` and waits for its answer, at most `timeout`.
    ///
    /// A failure is thrown as the error it was in the agent. An answer that does not come in time ends the connection.
    func request(_ request: AgentRequest, within timeout: Duration = answerTimeout) throws -> AgentReply {
        let id = try locked { () throws -> UInt32 in
            if let gone { throw gone }
            nextID &+= 1
            if nextID == 0 { nextID = 1 }  // 0 is for events and refusals
            return nextID
        }
        let frame = try AgentWireFormat.encode(request, id: id)
        // Under `sending`, which the reader holds to close the descriptor: never a send to a reused one.
        let sent = sending.withLock { isConnected && FrameChannel.send(frame, on: descriptor, within: timeout) }
        frame.wipe()
        condition.lock()
        defer { condition.unlock() }
        if !sent && gone == nil { _ = shutdown(descriptor.rawValue, Int32(SHUT_RDWR)) }
        let deadline = Date(timeIntervalSinceNow: Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        while answers[id] == nil && gone == nil {
            guard condition.wait(until: deadline) else {
                // The reader ends the link (no late answer is taken), unless it already has: then the descriptor
                // may be closed and its number someone else's.
                if gone == nil && !shutDownOnce { _ = shutdown(descriptor.rawValue, Int32(SHUT_RDWR)) }
                throw DeviceError.agentNotAnswering(stateDirectory, within: timeout)
            }
        }
        guard let answer = answers.removeValue(forKey: id) else { throw gone ?? DeviceError.agentDisconnected(stateDirectory) }
        if case .failure(let failure) = answer { throw failure.error }
        return answer
    }

    func requestStatus(_ request: AgentRequest) throws -> DeviceAgentStatus {
        guard case .status(let status) = try self.request(request) else {
            throw DeviceError.agentRefused("the agent answered with something other than the device's state")
        }
        return status
    }

    private func readUntilClosed() {
        var ending = DeviceError.agentDisconnected(stateDirectory)
        reading: while true {
            let body: SecureBytes
            switch FrameChannel.receive(descriptor, firstByteTimeout: nil, timeout: .seconds(10)) {
            case .closed, .broken: break reading
            case .malformed(let malformed):
                ending = .agentRefused("the agent sent \(malformed.reason)")
                break reading
            case .body(let received): body = received
            }
            let frame: AgentWireFormat.ReplyFrame
            do {
                frame = try body.withUnsafeBytes { try AgentWireFormat.decodeReply($0) }
            } catch {
                ending = .agentRefused("the agent sent a malformed reply: \(error)")
                break reading
            }
            body.wipe()
            switch frame.reply {
            case .event(let event, let newStatus):
                locked {
                    status = newStatus
                    hub.enqueue(event)
                }
                hub.deliverPending()
            case .failure(let failure) where frame.id == 0:
                // The agent refuses the connection (too many clients, a malformed request): it closes next.
                if let refusal = failure.error as? DeviceError { ending = refusal }
                break reading
            case .status(let newStatus):
                locked {
                    status = newStatus
                    answers[frame.id] = frame.reply
                    condition.broadcast()
                }
            default:
                locked {
                    answers[frame.id] = frame.reply
                    condition.broadcast()
                }
            }
        }
        // Gone: nothing is available any more, and every waiting request fails, but only once the subscribers
        // have had *did become unavailable*. A request that learns the agent is gone (the shell's `status` before
        // each command) then finds the app's store already closing, as after any event: woken first, a shell
        // once checked `expect store waiting` while the event was still on its way (a CI run under TSan).
        let hadProtectedData = locked { () -> Bool in
            let had = !status.availability.availableClasses.isEmpty
            status.availability = ProtectedDataAvailability(availableClasses: [])
            if had { hub.enqueue(.didBecomeUnavailable) }
            return had
        }
        if hadProtectedData { hub.deliverPending() }
        locked {
            gone = ending
            condition.broadcast()
            shutDownOnce = true
        }
        sending.withLock { try? descriptor.close() }
    }

    private func locked<Result>(_ body: () throws -> Result) rethrows -> Result {
        condition.lock()
        defer { condition.unlock() }
        return try body()
    }
}
