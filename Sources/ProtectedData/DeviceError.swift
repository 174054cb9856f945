public import Foundation
public import SecureKeys
public import StoreErrors

/// An error from the simulated device, with the project's kebab-case codes.
public struct DeviceError: Error, Sendable, CustomStringConvertible, LocalizedError {
    /// What kind of failure, as `StoreError.Code`, the one code type of every layer.
    ///
    /// The device's codes are declared in this module, in an extension of `StoreError.Code`.
    public typealias Code = StoreError.Code

    /// What kind of failure.
    public var code: Code
    /// A sentence for a person, without any secret.
    public var message: String
    /// How long until the next attempt is allowed, on the device's clock.
    ///
    /// Set for `Code.passcodeDelay`, and for a `Code.wrongPasscode` that starts a delay.
    public var retryAfter: Duration?
    /// Consecutive failures so far, for `Code.wrongPasscode`.
    public var failedAttempts: Int?
    /// The process id of the state directory's owner, when it could be read.
    ///
    /// Set for `Code.stateInUse`.
    public var holderProcessID: Int32?

    /// An error of the device.
    ///
    /// - Parameters:
    ///   - code: what kind of failure.
    ///   - message: a sentence for a person.
    ///   - retryAfter: for a passcode delay, how long until the next attempt.
    ///   - failedAttempts: consecutive wrong passcodes so far.
    ///   - holderProcessID: for a state directory in use, the process id of its owner.
    public init(
        code: Code, message: String, retryAfter: Duration? = nil, failedAttempts: Int? = nil, holderProcessID: Int32? = nil
    ) {
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
        self.failedAttempts = failedAttempts
        self.holderProcessID = holderProcessID
    }

    /// `code: message`.
    public var description: String { "\(code.name): \(message)" }
    /// The same text.
    ///
    /// swift-argument-parser prints this for errors a command throws.
    public var errorDescription: String? { description }

    static func noDevice(at directory: String) -> Self {
        Self(code: .noDevice, message: "no device is set up in \(directory); run `device setup` first")
    }

    static func interruptedSetUp(at directory: String) -> Self {
        Self(
            code: .noDevice,
            message: "the device set-up in \(directory) stopped part-way (a full or failing disk, or a crash); run `device setup` again")
    }

    package static func deviceExists(at directory: String) -> Self {
        Self(code: .deviceExists, message: "a device is already set up in \(directory); it is never replaced")
    }

    /// The delay is said to be on the device's clock.
    ///
    /// The simulated device counts it on the clock it was given, which in the tool and in tests is a manual one
    /// that only `clock advance` moves. Waiting in real time would never end it.
    static func wrongPasscode(failedAttempts: Int, delay: Duration) -> Self {
        var message = "wrong passcode (\(failedAttempts) failed attempt\(failedAttempts == 1 ? "" : "s"))"
        if delay > .zero { message += "; \(waitText(delay))" }
        return Self(
            code: .wrongPasscode, message: message, retryAfter: delay > .zero ? delay : nil, failedAttempts: failedAttempts)
    }

    static func passcodeDelay(remaining: Duration, failedAttempts: Int) -> Self {
        Self(
            code: .passcodeDelay,
            message: "too many wrong passcodes (\(failedAttempts)); \(waitText(remaining))",
            retryAfter: remaining, failedAttempts: failedAttempts)
    }

    private static func waitText(_ delay: Duration) -> String {
        "wait \(delay.spoken) on the device clock before the next attempt"
    }

    static func deviceWiped() -> Self {
        Self(code: .deviceWiped, message: "the device erased its keys after too many wrong passcodes; its data cannot be read")
    }

    /// The keys of `protectionClass` are not held now (locked, or before the first unlock).
    public static func protectedDataUnavailable(_ protectionClass: ProtectionClass) -> Self {
        Self(
            code: .protectedDataUnavailable,
            message: "protected data of class \(protectionClass.name) is unavailable (the device is locked or has not been unlocked since boot)")
    }

    /// The state directory `directory` is owned by another device.
    ///
    /// The owner is the process `holder` (`nil` when unknown), or this very process.
    ///
    /// What to do depends on who was refused: a shell or a script can go through a device agent, while an
    /// agent refused by a shell can only wait for that shell to end.
    ///
    /// - Parameters:
    ///   - directory: the state directory.
    ///   - holder: the process id its lock file names, if it could be read.
    ///   - byAgent: whether the holder is a device agent.
    ///   - requester: who was refused: a process opening the device itself, or a device agent.
    public static func stateInUse(
        _ directory: String, holder: Int32?, byAgent: Bool = false, requester: StateDirectoryLock.Owner = .process
    ) -> Self {
        let start = "the state directory \(directory) is in use by"
        let message: String
        let holderName = holder.map { "process \($0)" } ?? "another process"
        if requester == .deviceAgent && holder != getpid() {
            message = byAgent
                ? "the state directory \(directory) is already served by a device agent (\(holderName)), which "
                    + "clients find through \(directory)/agent: one agent is all a directory has, and shells and scripts on it "
                    + "go through that one"
                : "\(start) \(holderName), which opened the device itself (a shell, a script or an app): an agent can "
                    + "serve the directory only once that process ends. Quit it (`quit` in a shell), start the agent "
                    + "again, then the shell: it goes through the agent"
        } else if byAgent {
            message = "the state directory \(directory) is served by a device agent (process \(holder.map(String.init) ?? "?")), "
                + "which clients find through \(directory)/agent: a shell or script started on the directory goes through it, "
                + "and one agent is all a directory has"
        } else if let holder, holder == getpid() {
            message = "\(start) this process (\(holder)): another device is already open on it"
        } else {
            message = "\(start) \(holderName); quit it, or start `protected-store device serve --state-dir \(directory)` "
                + "and let every process go through the agent"
        }
        return Self(code: .stateInUse, message: message, holderProcessID: holder)
    }

    package static func invalidSetting(_ what: String) -> Self {
        Self(code: .invalidDeviceSetting, message: what)
    }

    /// The erase of the device in `directory` stopped at `cause`.
    ///
    /// The key files it names are still on disk.
    static func wipeIncomplete(_ directory: String, cause: any Error) -> Self {
        Self(
            code: .wipeIncomplete,
            message: "the device in \(directory) began erasing its keys after too many wrong passcodes but is NOT erased yet: "
                + "\(cause); no key is held in memory and no passcode is tried, and the erase is finished at the next "
                + "attempt or boot")
    }

    static func clockLimit(_ what: String) -> Self {
        Self(code: .clockLimit, message: what)
    }

    /// The device in `directory` keeps its key in a store of kind `kept`, and was given one of kind `given`.
    ///
    /// `servedByAgent` says a device agent has served it (its `agent/` folder is there), so the user most likely
    /// meant to reach that agent, which is not running.
    static func keyStoreMismatch(
        _ directory: String, kept: DeviceKeyStoreKind, given: DeviceKeyStoreKind, servedByAgent: Bool = false
    ) -> Self {
        var advice = switch kept {
        case .tpm: "boot it with the TPM key store (`--key-store tpm`, or `auto`)"
        case .file: "boot it with the file key store, or move the key into the TPM first (`protected-store device migrate-key --to tpm`)"
        }
        if servedByAgent {
            advice = "its device agent is not running: start it (`systemctl --user start protected-store-device.service`, "
                + "or `protected-store device serve --state-dir \(directory)` with its options), then connect again; "
                + "or else " + advice
        }
        return Self(
            code: .keyStoreMismatch,
            message: "the device in \(directory) keeps its key in \(kept == .tpm ? "the TPM (hardware/uid.tpm)" : "a file (hardware/uid.key)"), "
                + "not in \(given == .tpm ? "a TPM" : "a file"): \(advice)")
    }

    /// No TPM answers at `tcti`.
    ///
    /// `reason` says why.
    package static func tpmUnavailable(tcti: String, reason: String) -> Self {
        Self(code: .tpmUnavailable, message: "no TPM 2.0 at \(tcti): \(reason)")
    }

    /// The sealed device key at `path` was sealed under another primary key than this TPM's.
    package static func sealedByAnotherTPM(_ path: String) -> Self {
        Self(
            code: .sealedByAnotherTPM,
            message: "the device key \(path) was sealed by another TPM, or this TPM's owner hierarchy was cleared since "
                + "(its storage key is not the one the key was sealed under): this TPM cannot unseal it; it was left as it is")
    }

    /// The TPM refused `command` with `response`, a decoded response code.
    package static func tpmFailure(_ command: String, response: String) -> Self {
        Self(code: .tpmFailure, message: "the TPM refused \(command): \(response)")
    }

    /// The TPM refuses passcode checks for now.
    ///
    /// Its lockout counter reached `maximum` failures (`counter` now), and it forgets one failure every
    /// `interval` (`nil` when the limits could not be read). The wait is until the counter is below `maximum`
    /// again.
    package static func tpmLockout(counter: UInt32?, maximum: UInt32?, interval: Duration?) -> Self {
        var message = "the TPM is in dictionary-attack lockout and refuses to check a passcode; the attempt was not counted"
        if let counter, let maximum { message += " (its lockout counter is \(counter) of \(maximum))" }
        var wait: Duration?
        if let interval, interval > .zero {
            let excess = Int(counter ?? 0) - Int(maximum ?? 0) + 1
            wait = interval * max(1, excess)
            message += "; it forgets one failure every \(interval.spoken): wait \(wait!.spoken) on the TPM's clock"
        }
        message += ". The counter is the TPM's, shared with its other users; where its lockout authorization is empty, "
            + "the machine's owner can reset it (`tpm2_dictionarylockout --clear-lockout`)"
        return Self(code: .tpmLockout, message: message, retryAfter: wait)
    }

    static func stateDamaged(_ path: String, _ what: String) -> Self {
        Self(code: .deviceStateDamaged, message: "device state \(path) is damaged: \(what); it was left as it is")
    }
}

extension StoreError.Code {
    /// No device was set up in the state directory.
    public static let noDevice = Self("no-device")
    /// A device already exists in the state directory.
    ///
    /// Set-up never replaces one.
    public static let deviceExists = Self("device-exists")
    /// A passcode attempt during the delay after wrong passcodes.
    public static let passcodeDelay = Self("passcode-delay")
    /// The device erased its keys after too many wrong passcodes.
    public static let deviceWiped = Self("device-wiped")
    /// The keys of a protection class are not held now (locked, or before the first unlock), or a store was
    /// closed because they stopped being held.
    public static let protectedDataUnavailable = Self("protected-data-unavailable")
    /// The device's state file is damaged.
    ///
    /// It was left as it is.
    public static let deviceStateDamaged = Self("device-state-damaged")
    /// Another device owns the state directory.
    ///
    /// That device is in another process, or already in this one.
    public static let stateInUse = Self("state-in-use")
    /// A setting or a new passcode outside ``DeviceRules`` (an empty passcode not asked for, `wipe-after 0`).
    public static let invalidDeviceSetting = Self("invalid-device-setting")
    /// The device began erasing its keys but could not remove a key file yet.
    ///
    /// The erase is finished at the next passcode attempt or boot. Until then the keys are still on disk, and the
    /// device is not erased.
    public static let wipeIncomplete = Self("wipe-incomplete")
    /// A clock advance past the virtual clock's end (1,000 years), or one step over 100 years.
    ///
    /// The limits are those of ``DeviceRules/checkClockAdvance(by:from:)``. The clock stays where it was.
    public static let clockLimit = Self("clock-limit")
    /// The device keeps its key in one store (a TPM, a file) and was booted with the other.
    public static let keyStoreMismatch = Self("key-store-mismatch")
    /// No TPM answers at the TCTI given (no device node, no simulator listening, not a TPM 2.0).
    public static let tpmUnavailable = Self("tpm-unavailable")
    /// The device key was sealed by another TPM, or this TPM's owner hierarchy was cleared since.
    ///
    /// No TPM can unseal it any more.
    public static let sealedByAnotherTPM = Self("sealed-by-another-tpm")
    /// The TPM refused a command (the message names it and the TPM's response code).
    public static let tpmFailure = Self("tpm-failure")
    /// The TPM is in dictionary-attack lockout.
    ///
    /// It refuses to check a passcode until it recovers (the message says how long, on the TPM's own clock). The
    /// attempt was not checked and is not counted.
    public static let tpmLockout = Self("tpm-lockout")
    /// The D-Bus bus a session lock source needs cannot be reached (no socket, connection refused).
    public static let noBus = Self("no-bus")
    /// No systemd-logind answers on the system bus, so the session's lock cannot be followed.
    public static let noLogind = Self("no-logind")
    /// systemd-logind knows no session of this process or of its user to follow.
    public static let noSession = Self("no-session")

    /// The codes this module declares, the ones a `DeviceError` carries (with ``wrongPasscode``, which the key
    /// layer declares).
    package static let deviceCodes: [Self] = [
        .noDevice, .deviceExists, .passcodeDelay, .deviceWiped, .protectedDataUnavailable, .deviceStateDamaged,
        .stateInUse, .agentRefused, .agentDisconnected, .agentFailed, .invalidDeviceSetting, .wipeIncomplete,
        .untrustedAgent, .clockLimit, .keyStoreMismatch, .tpmUnavailable, .sealedByAnotherTPM, .tpmFailure,
        .tpmLockout, .noBus, .noLogind, .noSession,
    ]

    /// The former name of ``deviceStateDamaged``.
    @available(*, deprecated, renamed: "deviceStateDamaged")
    public static var stateDamaged: Self { .deviceStateDamaged }
    /// The former name of ``invalidDeviceSetting``.
    @available(*, deprecated, renamed: "invalidDeviceSetting")
    public static var invalidSetting: Self { .invalidDeviceSetting }
}

extension Duration {
    /// How durations read in messages and timelines.
    ///
    /// For example "1m 30s", "250ms" and "1h". A negative duration reads as "-" and its length. None traps,
    /// however long.
    public var spoken: String {
        let (seconds, attoseconds) = components
        if seconds < 0 || attoseconds < 0 { return "-" + (Duration.zero - self).spoken }
        let milliseconds = attoseconds / 1_000_000_000_000_000
        if seconds == 0 && milliseconds == 0 { return "0s" }
        if milliseconds != 0 && seconds < 60 {
            return seconds == 0 ? "\(milliseconds)ms" : String(format: "%.3gs", Double(seconds) + Double(milliseconds) / 1000)
        }
        var rest = seconds
        var parts: [String] = []
        for (unit, size) in [("h", Int64(3600)), ("m", 60), ("s", 1)] where rest >= size {
            parts.append("\(rest / size)\(unit)")
            rest %= size
        }
        return parts.joined(separator: " ")
    }
}
