public import SecureKeys

/// What a client asks the device agent (``DeviceAgent``), one frame each.
///
/// Passcodes travel as `SecureBytes`, never as a `String` or an array: the frame that carries one is guarded
/// memory, wiped when it is released.
@_spi(DeviceAgentWire)
public enum AgentRequest: Sendable {
    /// The first frame of every connection.
    ///
    /// It carries the wire protocol the client speaks, and a name for the agent's log.
    case hello(protocolVersion: UInt32, clientName: String)
    /// The device's state now.
    ///
    /// It is also what a client sends to catch up with every event pushed before it.
    case status
    /// Set up a new device (the agent's directory holds none yet).
    ///
    /// The device checks the settings and the passcode against ``DeviceRules``, as the command line does. An
    /// empty passcode is allowed only when `allowsEmptyPasscode` says it was asked for.
    case setUp(passcode: SecureBytes, gracePeriod: Duration, wipeAfterFailures: Int?, allowsEmptyPasscode: Bool = false)
    /// Unlock with the passcode.
    ///
    /// A wrong one counts, whoever sent it.
    case unlock(passcode: SecureBytes)
    /// Lock now.
    ///
    /// The grace period starts.
    case lock
    /// Change the passcode.
    ///
    /// An empty new one is allowed only when `allowsEmptyPasscode` says it was asked for.
    case changePasscode(old: SecureBytes, new: SecureBytes, allowsEmptyPasscode: Bool = false)
    /// The key of the store at an absolute path.
    ///
    /// It is given only while its class is available.
    case lookUpStoreKey(storePath: String)
    /// Create the key of a new store at an absolute path.
    case createStoreKey(storePath: String, protectionClass: ProtectionClass)
    /// Move the device's virtual clock.
    ///
    /// Grace periods and passcode delays count on it.
    case advanceClock(Duration)
    /// Power the device off and boot it again, before the first unlock.
    case reboot
    /// Check the passcode as an unlock attempt whether the device is locked or not.
    ///
    /// A wrong one counts, whoever sent it. A right one unlocks a locked device. Version 3.
    case authenticate(passcode: SecureBytes)
}

/// What the device agent sends.
///
/// It is the answer to a request, or an event it pushes to every client.
@_spi(DeviceAgentWire)
public enum AgentReply: Sendable {
    /// The device's state.
    ///
    /// It is the answer to `hello`, `status` and every request that changes the device.
    case status(DeviceAgentStatus)
    /// The request failed, or the agent refuses the connection.
    case failure(AgentFailure)
    /// The answer to a store-key request. An available key is a fresh copy the client owns.
    case storeKey(StoreKeyLookup)
    /// Pushed to every client when protected data changes, with the state after it.
    case event(ProtectedDataEvent, DeviceAgentStatus)
}

/// The device as the agent sees it, sent with every answer that changes it and with every event.
public struct DeviceAgentStatus: Sendable, Hashable {
    /// The agent's process id.
    public var agentProcessID: Int32
    /// The lock state, or `nil` when no device is set up in the agent's state directory yet.
    public var lockState: KeybagDevice.LockState?
    /// The protection classes whose keys the agent holds now.
    public var availability: ProtectedDataAvailability
    /// Consecutive wrong passcodes, from every client, persisted across reboots and agent restarts.
    public var failedPasscodeAttempts: Int
    /// The device's virtual clock.
    ///
    /// It is 0 when the agent started, moved only by clients' clock advances (never by real time), and at most
    /// 1,000 years.
    public var clock: Duration

    /// A status.
    ///
    /// - Parameters:
    ///   - agentProcessID: the agent's process id.
    ///   - lockState: the lock state, `nil` without a device.
    ///   - availability: the classes available now.
    ///   - failedPasscodeAttempts: consecutive wrong passcodes.
    ///   - clock: the device clock's time.
    public init(
        agentProcessID: Int32, lockState: KeybagDevice.LockState?, availability: ProtectedDataAvailability,
        failedPasscodeAttempts: Int, clock: Duration
    ) {
        self.agentProcessID = agentProcessID
        self.lockState = lockState
        self.availability = availability
        self.failedPasscodeAttempts = failedPasscodeAttempts
        self.clock = clock
    }
}

/// A failure as it crosses the socket.
///
/// It carries which layer's error, its code, its message and its details. The client turns it back into the same
/// `DeviceError` or `SecureKeysError`.
@_spi(DeviceAgentWire)
public struct AgentFailure: Sendable, Hashable {
    /// Whose error it was.
    public enum Domain: UInt8, Sendable {
        /// A ``DeviceError`` (the agent's own refusals are device errors too).
        case device = 1
        /// A `SecureKeysError` (a damaged key file, say).
        case secureKeys = 2
    }

    /// Whose error it was.
    public var domain: Domain
    /// The kebab-case code.
    public var code: String
    /// The sentence for a person (never a secret).
    public var message: String
    /// How long until the next attempt, for a passcode delay.
    public var retryAfter: Duration?
    /// Consecutive failures, for a wrong passcode.
    public var failedAttempts: Int?

    /// A failure.
    ///
    /// - Parameters:
    ///   - domain: whose error.
    ///   - code: the kebab-case code.
    ///   - message: the sentence.
    ///   - retryAfter: the passcode delay left.
    ///   - failedAttempts: consecutive wrong passcodes.
    public init(domain: Domain, code: String, message: String, retryAfter: Duration? = nil, failedAttempts: Int? = nil) {
        self.domain = domain
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
        self.failedAttempts = failedAttempts
    }
}

extension AgentFailure {
    /// The failure that carries `error` across the socket.
    init(_ error: any Error) {
        switch error {
        case let device as DeviceError:
            self.init(
                domain: .device, code: device.code.name, message: device.message, retryAfter: device.retryAfter,
                failedAttempts: device.failedAttempts)
        case let keys as SecureKeysError:
            self.init(domain: .secureKeys, code: keys.code.name, message: keys.message)
        default:
            self.init(domain: .device, code: DeviceError.Code.agentRefused.name, message: "the agent failed: \(error)")
        }
    }

    /// The error the agent threw, rebuilt with its type and code.
    var error: any Error {
        switch domain {
        case .device:
            DeviceError(code: DeviceError.Code(code), message: message, retryAfter: retryAfter, failedAttempts: failedAttempts)
        case .secureKeys:
            if let known = SecureKeysError.Code.secureKeysCodes.first(where: { $0.name == code }) {
                SecureKeysError(code: known, message: message)
            } else {
                DeviceError(code: DeviceError.Code(code), message: message)
            }
        }
    }
}

/// Compares field by field, for the wire format's round-trip checks.
///
/// Passcodes are compared in constant time.
@_spi(DeviceAgentWire)
extension AgentRequest: Equatable {
    public static func == (a: AgentRequest, b: AgentRequest) -> Bool {
        switch (a, b) {
        case let (.hello(v1, n1), .hello(v2, n2)): v1 == v2 && n1 == n2
        case (.status, .status), (.lock, .lock), (.reboot, .reboot): true
        case let (.setUp(p1, g1, w1, e1), .setUp(p2, g2, w2, e2)): p1.constantTimeEquals(p2) && g1 == g2 && w1 == w2 && e1 == e2
        case let (.unlock(p1), .unlock(p2)), let (.authenticate(p1), .authenticate(p2)): p1.constantTimeEquals(p2)
        case let (.changePasscode(o1, n1, e1), .changePasscode(o2, n2, e2)): o1.constantTimeEquals(o2) && n1.constantTimeEquals(n2) && e1 == e2
        case let (.lookUpStoreKey(s1), .lookUpStoreKey(s2)): s1 == s2
        case let (.createStoreKey(s1, c1), .createStoreKey(s2, c2)): s1 == s2 && c1 == c2
        case let (.advanceClock(d1), .advanceClock(d2)): d1 == d2
        default: false
        }
    }
}

/// Compares field by field, for the wire format's round-trip checks.
///
/// Store keys are compared in constant time.
@_spi(DeviceAgentWire)
extension AgentReply: Equatable {
    public static func == (a: AgentReply, b: AgentReply) -> Bool {
        switch (a, b) {
        case let (.status(s1), .status(s2)): s1 == s2
        case let (.failure(f1), .failure(f2)): f1 == f2
        case (.storeKey(.absent), .storeKey(.absent)): true
        case let (.storeKey(.locked(c1)), .storeKey(.locked(c2))): c1 == c2
        case let (.storeKey(.available(k1)), .storeKey(.available(k2))): k1.constantTimeEquals(k2)
        case let (.event(e1, s1), .event(e2, s2)): e1 == e2 && s1 == s2
        default: false
        }
    }
}
