import Foundation
internal import Logging
public import SecureKeys


/// The device a store lives on: a passcode, a keybag of class keys, lock and unlock, a grace period, and
/// the wrong-passcode delays — persisted in a state directory, so a new instance on the same directory is a
/// reboot.
///
/// One device at a time owns a state directory: set-up and boot take its ``StateDirectoryLock`` before they
/// look at a file, and keep it until ``powerOff()`` or until the device is freed. A second device on the
/// directory — in another process, or in this one before the first is powered off — is refused with
/// ``DeviceError/Code/stateInUse``.
///
/// Time comes from an injected clock: `ContinuousClock` by default, a ``ManualClock`` in tests and scripts.
/// The end of a grace period is a timer on that clock — on a manual clock it fires inside the `advance` that
/// passes it — and every query also applies deadlines that have passed, so the answer is never stale.
public final class SimulatedDevice: KeyAvailabilityMonitor, StoreKeyProvider {
    /// How a device is set up.
    public struct Configuration: Sendable {
        /// How long class A and B keys stay after a lock. iOS uses about 10 seconds.
        public var gracePeriod: Duration = .seconds(10)
        /// Wrong-passcode delays and optional wipe.
        public var attemptPolicy = PasscodeAttemptPolicy()
        /// The Argon2id cost of the passcode.
        public var kdf: PasscodeKDF = .default

        /// A configuration.
        ///
        /// - Parameters:
        ///   - gracePeriod: how long class A and B keys stay after a lock.
        ///   - attemptPolicy: delays after wrong passcodes, and the optional wipe.
        ///   - kdf: the Argon2id cost of the passcode.
        public init(gracePeriod: Duration = .seconds(10), attemptPolicy: PasscodeAttemptPolicy = .init(), kdf: PasscodeKDF = .default) {
            self.gracePeriod = gracePeriod
            self.attemptPolicy = attemptPolicy
            self.kdf = kdf
        }
    }

    /// Whether the device is locked, and what that means for its keys.
    public enum LockState: Sendable, Hashable, CustomStringConvertible {
        /// Booted and not unlocked since: only class `ProtectionClass/none` is available.
        case beforeFirstUnlock
        /// Unlocked: every class is available.
        case unlocked
        /// Locked, within the grace period: class A and B keys are still held for `remaining`.
        case lockedInGracePeriod(remaining: Duration)
        /// Locked after the grace period: classes C and D are available.
        case locked
        /// Erased after too many wrong passcodes.
        case wiped

        /// The state in words (`locked (grace 4s left)`).
        public var description: String {
            switch self {
            case .beforeFirstUnlock: "before first unlock"
            case .unlocked: "unlocked"
            case .lockedInGracePeriod(let remaining): "locked (grace \(remaining.spoken) left)"
            case .locked: "locked"
            case .wiped: "wiped"
            }
        }
    }

    private struct State {
        var persisted: PersistedDeviceState
        var keybag: Keybag?
        var deviceKey: SecureBytes?
        var heldKeys: [ProtectionClass: SecureBytes] = [:]
        var isLocked = true
        var graceDeadline: Timekeeper.Instant?
        var lastFailure: Timekeeper.Instant?
    }

    /// The state directory.
    public let directory: String
    private let layout: DeviceLayout
    private let clock: Timekeeper
    private let random: any RandomSource
    private let state: LockedState<State>
    /// The directory's lock, held for the device's life.
    private let ownership: StateDirectoryLock
    /// Whether the device took ``ownership`` itself, and so gives it up at power-off; a lock the caller
    /// passed in is the caller's to release.
    private let releasesOwnership: Bool
    private let hub = EventHub<ProtectedDataEvent>()
    /// `protected-store.device`: lock states and store-key look-ups; never a passcode or key byte.
    private let logger = LogSubsystem.device.makeLogger()

    // MARK: Set-up and boot

    /// Sets up a new device in `directory`: a device key, a keybag with fresh class keys, the settings.
    /// The device is left unlocked, as a phone is after its set-up.
    ///
    /// - Parameters:
    ///   - directory: the state directory; created when missing.
    ///   - passcode: the device's passcode.
    ///   - configuration: grace period, wrong-passcode policy and Argon2id cost.
    ///   - clock: the clock of grace periods and passcode delays.
    ///   - random: where keys come from.
    ///   - ownership: a lock on `directory` that the caller holds and keeps (a device agent that owns the
    ///     directory for its whole life, across reboots of its device): the device uses it instead of taking
    ///     one, and never releases it. `nil`: the device takes the lock itself and releases it at
    ///     ``powerOff()``. A lock on another directory is a programming error.
    /// - Throws: ``DeviceError/Code/stateInUse`` when another device owns `directory`;
    ///   ``DeviceError/Code/deviceExists`` when `directory` already holds a device (it is never replaced);
    ///   `SecureKeysError` for file-system failures.
    public static func setUp(
        in directory: String, passcode: SecureBytes, configuration: Configuration = Configuration(),
        clock: any Clock<Duration> = ContinuousClock(),
        random: any RandomSource = SystemRandom(),
        ownership: StateDirectoryLock? = nil
    ) throws -> SimulatedDevice {
        // The lock first: the files below are looked at only by the directory's one owner.
        let lock = try takeOwnership(of: directory, given: ownership)
        let layout = DeviceLayout(root: directory)
        for path in [layout.statePath, layout.keybagPath, layout.deviceKeyPath] where SecureFile.exists(path) {
            throw DeviceError.deviceExists(at: directory)
        }
        try SecureFile.createDirectory(at: layout.deviceDirectory)
        try SecureFile.createDirectory(at: layout.hardwareDirectory)
        let deviceKey = SecureBytes.random(count: 32, using: random)
        try SecureFile.writeSecret(deviceKey, to: layout.deviceKeyPath)
        let (keybag, keys) = try Keybag.create(passcode: passcode, deviceKey: deviceKey, kdf: configuration.kdf, random: random)
        try SecureFile.writeAtomically(keybag.bytes, to: layout.keybagPath, replacing: false)
        // The state file is written last: its presence says the set-up completed.
        let persisted = PersistedDeviceState(
            gracePeriodMilliseconds: configuration.gracePeriod.milliseconds,
            wipeAfterFailures: configuration.attemptPolicy.wipeAfterFailures)
        try persisted.write(to: layout.statePath, replacing: false)
        var state = State(persisted: persisted, keybag: keybag, deviceKey: deviceKey)
        for protectionClass in ProtectionClass.allCases { state.heldKeys[protectionClass] = keys[protectionClass] }
        state.isLocked = false
        return SimulatedDevice(
            layout: layout, state: state, clock: Timekeeper(clock), random: random, ownership: lock,
            releasesOwnership: ownership == nil)
    }

    /// Boots the device kept in `directory`: a reboot. Before the first unlock only class
    /// `ProtectionClass/none` is available.
    ///
    /// - Parameters:
    ///   - directory: the state directory.
    ///   - clock: the clock of grace periods and passcode delays.
    ///   - random: where keys come from.
    ///   - ownership: a lock on `directory` that the caller holds and keeps, as for
    ///     ``setUp(in:passcode:configuration:clock:random:ownership:)``: the device uses it and never
    ///     releases it. `nil`: the device takes the lock itself and releases it at ``powerOff()``.
    /// - Throws: ``DeviceError/Code/stateInUse`` when another device owns `directory` (power the previous
    ///   one off first: a reboot in the same process is `powerOff()`, then a new boot);
    ///   ``DeviceError/Code/noDevice`` when nothing was set up there; `SecureKeysError` with
    ///   `key-file-damaged` for a damaged keybag (left as it is).
    public convenience init(
        bootingFrom directory: String, clock: any Clock<Duration> = ContinuousClock(),
        random: any RandomSource = SystemRandom(),
        ownership: StateDirectoryLock? = nil
    ) throws {
        // The lock first: a state file read while another device may still write it could be stale.
        let lock = try Self.takeOwnership(of: directory, given: ownership)
        let layout = DeviceLayout(root: directory)
        guard SecureFile.exists(layout.statePath) else { throw DeviceError.noDevice(at: directory) }
        var state = State(persisted: try PersistedDeviceState.load(from: layout.statePath))
        if !state.persisted.wiped {
            let deviceKey = try SecureFile.readSecret(layout.deviceKeyPath)
            let keybag = try Keybag.load(from: layout.keybagPath, deviceKey: deviceKey)
            state.deviceKey = deviceKey
            state.keybag = keybag
            state.heldKeys[.none] = try keybag.unwrapNoneClassKey(deviceKey: deviceKey)
        }
        let timekeeper = Timekeeper(clock)
        // A restart must not shorten a passcode delay: it starts again in full from boot.
        if state.persisted.attemptPolicy.delay(afterFailures: state.persisted.failedPasscodeAttempts) > .zero {
            state.lastFailure = timekeeper.now
        }
        self.init(
            layout: layout, state: state, clock: timekeeper, random: random, ownership: lock,
            releasesOwnership: ownership == nil)
    }

    private init(
        layout: DeviceLayout, state: State, clock: Timekeeper, random: any RandomSource,
        ownership: StateDirectoryLock, releasesOwnership: Bool
    ) {
        self.random = random
        self.directory = layout.root
        self.layout = layout
        self.clock = clock
        self.state = LockedState(state)
        self.ownership = ownership
        self.releasesOwnership = releasesOwnership
    }

    /// The lock of `directory`: `given` (checked to be that directory's, and held), or a new one.
    private static func takeOwnership(of directory: String, given: StateDirectoryLock?) throws -> StateDirectoryLock {
        guard let given else { return try StateDirectoryLock.acquire(directory) }
        precondition(
            SimulatedDisk.normalize(given.directory) == SimulatedDisk.normalize(directory),
            "the ownership lock is of \(given.directory), not of the device's directory \(directory)")
        precondition(given.isHeld, "the ownership lock of \(directory) was released")
        return given
    }

    // MARK: Reading the state

    /// Whether the device is locked, and what its keys are doing.
    public var lockState: LockState {
        refresh()
        return state.withLock { state in
            if state.persisted.wiped { return .wiped }
            if !state.isLocked { return .unlocked }
            if state.heldKeys[.completeUntilFirstUserAuthentication] == nil { return .beforeFirstUnlock }
            if let deadline = state.graceDeadline { return .lockedInGracePeriod(remaining: deadline - clock.now) }
            return .locked
        }
    }

    /// Consecutive wrong passcodes so far (persisted across reboots).
    public var failedPasscodeAttempts: Int { state.withLock { $0.persisted.failedPasscodeAttempts } }

    /// The grace period after a lock.
    public var gracePeriod: Duration { state.withLock { $0.persisted.gracePeriod } }

    /// How long until a passcode may be tried again, or `nil` when it may be tried now.
    public var passcodeRetryDelay: Duration? {
        state.withLock { remainingDelay(in: $0) }
    }

    /// The public half of the class-B key pair: always available, to seal data while locked.
    public var completeUnlessOpenPublicKey: [UInt8]? { state.withLock { $0.keybag?.completeUnlessOpenPublicKey } }

    public func isProtectedDataAvailable(for protectionClass: ProtectionClass) -> Bool {
        refresh()
        return state.withLock { $0.heldKeys[protectionClass] != nil }
    }

    /// Which classes are available now.
    public var availability: ProtectedDataAvailability {
        refresh()
        return state.withLock { ProtectedDataAvailability(availableClasses: Set($0.heldKeys.keys)) }
    }

    public func subscribe(
        _ handler: @escaping @Sendable (ProtectedDataEvent) -> Void
    ) -> (availability: ProtectedDataAvailability, subscription: EventSubscription) {
        refresh()
        return state.withLock { state in
            (ProtectedDataAvailability(availableClasses: Set(state.heldKeys.keys)), hub.subscribe(handler))
        }
    }

    /// The key of `protectionClass` while it is held. Package-only: the simulator checks that keys it saw
    /// are wiped; app code asks for store keys instead.
    package func classKey(_ protectionClass: ProtectionClass) -> SecureBytes? {
        refresh()
        return state.withLock { $0.heldKeys[protectionClass] }
    }

    // MARK: Lock and unlock

    /// Unlocks with the passcode: unwraps the class keys (Argon2id) and delivers *did become available*.
    /// Unlocking an unlocked device succeeds and changes nothing.
    ///
    /// - Throws: ``DeviceError/Code/wrongPasscode`` (counted, persisted), ``DeviceError/Code/passcodeDelay``
    ///   during a delay (not counted), ``DeviceError/Code/deviceWiped``.
    public func unlock(passcode: SecureBytes) throws {
        refresh()
        let keybag: Keybag
        let deviceKey: SecureBytes
        switch try state.withLock({ state -> (Keybag, SecureBytes)? in
            try checkAttemptAllowed(state)
            guard state.isLocked else { return nil }
            return (state.keybag!, state.deviceKey!)
        }) {
        case nil: return
        case let (bag, key)?:
            keybag = bag
            deviceKey = key
        }
        // Argon2id runs outside the lock, so queries are not held up for its ~80 ms.
        let keys = try attempt { try keybag.unlock(passcode: passcode, deviceKey: deviceKey) }
        logger.debug("unlocked: class keys unwrapped")
        state.withLock { state in
            for protectionClass in ProtectionClass.allCases {
                if state.heldKeys[protectionClass] == nil {
                    state.heldKeys[protectionClass] = keys[protectionClass]
                } else {
                    keys[protectionClass]?.wipe()  // still held from before (grace period): keep that copy
                }
            }
            let wasLocked = state.isLocked
            state.isLocked = false
            state.graceDeadline = nil
            if wasLocked { hub.enqueue(.didBecomeAvailable) }
        }
        hub.deliverPending()
    }

    /// Locks the device: delivers *will become unavailable* now, and wipes class A and B keys when the grace
    /// period ends. Locking a locked device changes nothing.
    public func lock() {
        refresh()
        let deadline = state.withLock { state -> Timekeeper.Instant? in
            guard !state.persisted.wiped, !state.isLocked else { return nil }
            state.isLocked = true
            let deadline = clock.now + state.persisted.gracePeriod
            state.graceDeadline = deadline
            hub.enqueue(.willBecomeUnavailable)
            return deadline
        }
        hub.deliverPending()
        if deadline != nil { logger.debug("locked: class A and B keys stay for the grace period") }
        // The grace period ends on the clock (a zero one at once): the keys are wiped then, with no one asking.
        if let deadline { clock.schedule(at: deadline) { [weak self] in self?.refresh() } }
    }

    /// Applies what the clock says has happened since the last look: ends a grace period (wiping class A
    /// keys and the class B private key). Idempotent; the grace timer and every query call it.
    func refresh() {
        state.withLock { state in
            guard state.isLocked, let deadline = state.graceDeadline, clock.now >= deadline else { return }
            for protectionClass in [ProtectionClass.complete, .completeUnlessOpen] {
                state.heldKeys.removeValue(forKey: protectionClass)?.wipe()
            }
            state.graceDeadline = nil
            hub.enqueue(.didBecomeUnavailable)
            logger.debug("grace period over: class A and B keys wiped")
        }
        hub.deliverPending()
    }

    /// Turns the device off, as before a reboot: every key in memory is zeroed now — class keys, the device
    /// key — whoever still holds a reference to one, and the device answers "nothing available" from then on.
    /// The state directory's lock is released (unless the caller passed it in as `ownership`), so the next
    /// boot, in this process or another, may take it: boot again with
    /// ``init(bootingFrom:clock:random:ownership:)``.
    public func powerOff() {
        state.withLock { state in
            for key in state.heldKeys.values { key.wipe() }
            state.heldKeys.removeAll()
            state.deviceKey?.wipe()
            state.isLocked = true
            state.graceDeadline = nil
        }
        if releasesOwnership { ownership.release() }
        logger.debug("powered off: every key in memory wiped")
    }

    deinit {
        state.withLock { state in
            for key in state.heldKeys.values { key.wipe() }
            state.deviceKey?.wipe()
        }
        if releasesOwnership { ownership.release() }
    }

    /// Changes the passcode: the class keys are rewrapped and the keybag replaced atomically, so a crash at
    /// any point leaves the old or the new passcode working, never neither. No store needs rekeying.
    ///
    /// - Throws: as ``unlock(passcode:)`` for the old passcode; `SecureKeysError` when the write fails
    ///   (the old keybag is then intact).
    public func changePasscode(from old: SecureBytes, to new: SecureBytes) throws {
        refresh()
        let (keybag, deviceKey) = try state.withLock { state -> (Keybag, SecureBytes) in
            try checkAttemptAllowed(state)
            return (state.keybag!, state.deviceKey!)
        }
        let changed = try attempt { try keybag.changingPasscode(from: old, to: new, deviceKey: deviceKey, random: random) }
        try changed.write(to: layout.keybagPath)
        state.withLock { $0.keybag = changed }
        logger.debug("passcode changed: class keys rewrapped")
    }

    // MARK: Store keys

    /// The key file of the store at `storePath` (`StoreFiles/key`), looked up three ways.
    ///
    /// - Throws: `SecureKeysError` when the key file is damaged or from another device: never a reason to
    ///   make a new key.
    public func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup {
        let keyPath = StoreFiles(database: storePath).key
        guard SecureFile.exists(keyPath) else {
            logger.trace("no store key yet", metadata: ["store": "\(storePath)"])
            return .absent
        }
        let file = try StoreKeyFile.load(from: keyPath)
        guard let classKey = classKey(file.protectionClass) else {
            logger.debug("store key locked", metadata: ["store": "\(storePath)", "class": "\(file.protectionClass)"])
            return .locked(file.protectionClass)
        }
        logger.trace("store key unwrapped", metadata: ["store": "\(storePath)", "class": "\(file.protectionClass)"])
        do {
            return .available(try file.unwrap(with: classKey, path: keyPath))
        } catch let error as SecureKeysError where error.code == .keyWiped {
            return .locked(file.protectionClass)  // wiped between the look-up and the unwrap
        }
    }

    /// Creates the key of a new store at `storePath`. Only for a store whose look-up said ``StoreKeyLookup/absent``.
    ///
    /// - Throws: ``DeviceError/Code/protectedDataUnavailable`` when the class key is not held;
    ///   `SecureKeysError` with `store-exists-without-key` when a store file exists without a key file,
    ///   `already-exists` when the key file exists.
    public func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes {
        guard let classKey = classKey(protectionClass) else { throw DeviceError.protectedDataUnavailable(protectionClass) }
        logger.debug("creating store key", metadata: ["store": "\(storePath)", "class": "\(protectionClass)"])
        return try StoreKeyFile.create(
            at: StoreFiles(database: storePath).key, forStoreAt: storePath, protectionClass: protectionClass,
            classKey: classKey, random: random)
    }

    // MARK: Passcode attempts

    private func remainingDelay(in state: State) -> Duration? {
        let delay = state.persisted.attemptPolicy.delay(afterFailures: state.persisted.failedPasscodeAttempts)
        guard delay > .zero, let lastFailure = state.lastFailure else { return nil }
        let remaining = lastFailure + delay - clock.now
        return remaining > .zero ? remaining : nil
    }

    private func checkAttemptAllowed(_ state: State) throws {
        if state.persisted.wiped { throw DeviceError.deviceWiped() }
        if let remaining = remainingDelay(in: state) {
            throw DeviceError.passcodeDelay(remaining: remaining, failedAttempts: state.persisted.failedPasscodeAttempts)
        }
    }

    /// Runs a passcode check, counting a wrong passcode (persisted before the error is thrown) and resetting
    /// the count on success.
    private func attempt<Result>(_ body: () throws -> Result) throws -> Result {
        do {
            let result = try body()
            try state.withLock { state in
                guard state.persisted.failedPasscodeAttempts != 0 else { return }
                state.persisted.failedPasscodeAttempts = 0
                state.lastFailure = nil
                try state.persisted.write(to: layout.statePath)
            }
            return result
        } catch let error as SecureKeysError where error.code == .wrongPasscode {
            let failure = try state.withLock { state -> DeviceError in
                state.persisted.failedPasscodeAttempts += 1
                state.lastFailure = clock.now
                let failures = state.persisted.failedPasscodeAttempts
                logger.debug("wrong passcode", metadata: ["failed-attempts": "\(failures)"])
                if state.persisted.attemptPolicy.wipes(afterFailures: failures) {
                    logger.debug("too many wrong passcodes: erasing the device")
                    try wipe(&state)
                    return DeviceError.deviceWiped()
                }
                try state.persisted.write(to: layout.statePath)
                return DeviceError.wrongPasscode(
                    failedAttempts: failures, delay: state.persisted.attemptPolicy.delay(afterFailures: failures))
            }
            hub.deliverPending()
            throw failure
        }
    }

    /// Erases the device: the keybag and the device key are destroyed, so nothing wrapped by them can be read
    /// again. This is the user's "Erase Data after 10 failed attempts" setting, never a recovery step.
    private func wipe(_ state: inout State) throws {
        state.persisted.wiped = true
        try state.persisted.write(to: layout.statePath)
        for key in state.heldKeys.values { key.wipe() }
        let hadProtectedData = state.heldKeys[.complete] != nil
        state.heldKeys.removeAll()
        state.deviceKey?.wipe()
        state.deviceKey = nil
        state.keybag = nil
        // Removed for good only once their folders are synced: a power cut must not bring the keys back.
        try DiskIO.unlink(layout.keybagPath)
        try DiskIO.unlink(layout.deviceKeyPath)
        try DiskIO.syncDirectory(SecureFile.folder(containing: layout.keybagPath))
        try DiskIO.syncDirectory(SecureFile.folder(containing: layout.deviceKeyPath))
        if hadProtectedData { hub.enqueue(.didBecomeUnavailable) }
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
