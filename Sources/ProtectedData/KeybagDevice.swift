package import DiskModel
import Foundation
internal import Logging
public import SecureKeys
import StoreConcurrency

/// The keybag device's former name, which called the production keybag "simulated".
@available(*, deprecated, renamed: "KeybagDevice")
public typealias SimulatedDevice = KeybagDevice

/// A device's keybag and its lock state, persisted in a state directory.
///
/// It holds a passcode, a keybag of class keys, lock and unlock, a grace period, and the wrong-passcode delays.
/// A new instance on the same directory is a reboot. It is the production keybag: the desktop's
/// `SessionDevice` and the device agent run it, and the command-line tool's simulated device is one on a
/// manual clock.
///
/// One device at a time owns a state directory. Set-up and boot take its ``StateDirectoryLock`` before they
/// look at a file, and keep it until ``powerOff()`` or until the device is freed. A second device on the
/// directory, in another process or in this one before the first is powered off, is refused with
/// `DeviceError.Code.stateInUse`.
///
/// Time comes from an injected clock: `ContinuousClock` by default, a ``ManualClock`` in tests and scripts.
/// The end of a grace period is a timer on that clock (on a manual clock it fires inside the `advance` that
/// passes it), and every query also applies deadlines that have passed, so the answer is never stale.
public final class KeybagDevice: KeyAvailabilityMonitor, StoreKeyProvider {
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
        /// Booted and not unlocked since.
        ///
        /// Only class `ProtectionClass/none` is available.
        case beforeFirstUnlock
        /// Unlocked.
        ///
        /// Every class is available.
        case unlocked
        /// Locked, within the grace period.
        ///
        /// Class A and B keys are still held for `remaining`.
        case lockedInGracePeriod(remaining: Duration)
        /// Locked after the grace period.
        ///
        /// Classes C and D are available.
        case locked
        /// Erased after too many wrong passcodes.
        ///
        /// No key is held, and no passcode is tried again. An erase that could not remove a key file yet
        /// (`DeviceError.Code.wipeIncomplete`) is finished at the next attempt or boot.
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
        /// Wiped in memory, but the erase on disk is not finished.
        ///
        /// The wiped state is not recorded yet (``wipeRecorded``), or a key file is not removed yet.
        var wipePending = false
        var wipeRecorded = false
    }

    /// The state directory.
    public let directory: String
    private let layout: DeviceLayout
    private let clock: Timekeeper
    private let random: any RandomSource
    /// What releases the passcode secret of a version-2 keybag.
    ///
    /// This is the key store's TPM, or `nil` for the file store.
    private let sealer: (any PasscodeSecretSealer)?
    private let state: LockedState<State>
    /// The directory's lock, held for the device's life.
    private let ownership: StateDirectoryLock
    /// Whether the device took ``ownership`` itself, and so gives it up at power-off.
    ///
    /// A lock the caller passed in is the caller's to release.
    private let releasesOwnership: Bool
    private let hub = EventHub<ProtectedDataEvent>()
    /// Held by a passcode attempt from its check through Argon2id to the count.
    ///
    /// Concurrent attempts are so evaluated one at a time against the count the previous one left. Queries never take
    /// it.
    private let attemptTurn = NSLock()
    /// The `protected-store.device` logger.
    ///
    /// It logs lock states and store-key look-ups, never a passcode or key byte.
    private let logger = LogSubsystem.device.makeLogger()

    // MARK: Set-up and boot

    /// Sets up a new device in `directory`.
    ///
    /// It makes a device key, a keybag with fresh class keys, and the settings. The device is left unlocked, as a phone
    /// is after its set-up.
    ///
    /// - Parameters:
    ///   - directory: the state directory; created when missing.
    ///   - passcode: the device's passcode.
    ///   - configuration: grace period, wrong-passcode policy and Argon2id cost.
    ///   - clock: the clock of grace periods and passcode delays.
    ///   - random: where keys come from.
    ///   - keyStore: where the new device key is kept: a file (the default) or a TPM. A store that seals passcode
    ///     secrets (a TPM's) gets a version-2 keybag, whose passcode the TPM checks and counts; the file store a
    ///     version-1 keybag.
    ///   - ownership: a lock on `directory` that the caller holds and keeps (a device agent that owns the
    ///     directory for its whole life, across reboots of its device): the device uses it instead of taking
    ///     one, and never releases it. `nil`: the device takes the lock itself and releases it at
    ///     ``powerOff()``. A lock on another directory is a programming error.
    ///   - allowsEmptyPasscode: whether an empty passcode was asked for explicitly.
    /// - Throws: `DeviceError.Code.invalidDeviceSetting` for a setting or passcode outside ``DeviceRules``;
    ///   `DeviceError.Code.stateInUse` when another device owns `directory`;
    ///   `DeviceError.Code.deviceExists` when `directory` already holds a device (it is never replaced);
    ///   `SecureKeysError` for file-system failures; the key store's errors (a TPM that cannot be reached).
    public static func setUp(
        in directory: String, passcode: SecureBytes, configuration: Configuration = Configuration(),
        clock: any Clock<Duration> = ContinuousClock(),
        random: any RandomSource = SystemRandom(),
        keyStore: any DeviceKeyStore = FileDeviceKeyStore(),
        ownership: StateDirectoryLock? = nil, allowsEmptyPasscode: Bool = false
    ) throws -> KeybagDevice {
        try setUp(
            in: directory, passcode: passcode, configuration: configuration, clock: clock, random: random, keyStore: keyStore,
            ownership: ownership, allowsEmptyPasscode: allowsEmptyPasscode, fileSystem: .real)
    }

    /// Sets up a new device in `directory`, its files written in `fileSystem`, as
    /// ``setUp(in:passcode:configuration:clock:random:keyStore:ownership:allowsEmptyPasscode:)`` does.
    package static func setUp(
        in directory: String, passcode: SecureBytes, configuration: Configuration = Configuration(),
        clock: any Clock<Duration> = ContinuousClock(),
        random: any RandomSource = SystemRandom(),
        keyStore: any DeviceKeyStore = FileDeviceKeyStore(),
        ownership: StateDirectoryLock? = nil, allowsEmptyPasscode: Bool = false, fileSystem: FileSystem
    ) throws -> KeybagDevice {
        try DeviceRules.check(configuration)
        try DeviceRules.checkNewPasscode(passcode, allowsEmpty: allowsEmptyPasscode)
        // The lock first: the files below are looked at only by the directory's one owner.
        let lock = try takeOwnership(of: directory, given: ownership, in: fileSystem)
        let layout = DeviceLayout(root: directory, fileSystem: fileSystem)
        try startSetUp(layout)
        let deviceKey = try SecureBytes.random(count: 32, using: random)
        let keybag: Keybag
        let keys: ClassKeys
        let persisted = PersistedDeviceState(
            gracePeriodMilliseconds: configuration.gracePeriod.milliseconds,
            wipeAfterFailures: configuration.attemptPolicy.wipeAfterFailures)
        do {
            try keyStore.keep(deviceKey, in: layout.keyFiles)
            // The keybag records that this device's state file is authenticated, so a version-1 file (untagged)
            // put in its place later is refused instead of read as an old device's.
            (keybag, keys) = try Keybag.create(
                passcode: passcode, deviceKey: deviceKey, kdf: configuration.kdf, options: [.authenticatedDeviceState],
                sealer: keyStore.passcodeSecretSealer, random: random)
            do {
                try SecureFile.writeAtomically(keybag.bytes, to: layout.keybagPath, replacing: false, in: layout.fileSystem)
                // The state file is written last: its presence says the set-up completed.
                try DeviceStateFile.write(persisted, deviceKey: deviceKey, to: layout.statePath, replacing: false, in: layout.fileSystem)
            } catch {
                keys.wipeAll()
                throw error
            }
        } catch {
            deviceKey.wipe()
            throw error  // the marker stays: the next set-up starts over
        }
        // Done: the marker has nothing left to say. A failure to remove it is harmless (boot and set-up both
        // look at the state file first) and is not the set-up's failure.
        do {
            try DiskIO.unlink(layout.setUpMarkerPath, in: layout.fileSystem)
            try DiskIO.syncDirectory(layout.deviceDirectory, in: layout.fileSystem)
        } catch {
            LogSubsystem.device.makeLogger().debug("set-up marker not removed", metadata: ["error": "\(error)"])
        }
        var state = State(persisted: persisted, keybag: keybag, deviceKey: deviceKey)
        for protectionClass in ProtectionClass.allCases { state.heldKeys[protectionClass] = keys[protectionClass] }
        state.isLocked = false
        return KeybagDevice(
            layout: layout, state: state, clock: Timekeeper(clock), random: random, sealer: keyStore.passcodeSecretSealer,
            ownership: lock, releasesOwnership: ownership == nil)
    }

    /// Boots the device kept in `directory`, as a reboot does.
    ///
    /// Before the first unlock only class `ProtectionClass/none` is available.
    ///
    /// - Parameters:
    ///   - directory: the state directory.
    ///   - clock: the clock of grace periods and passcode delays.
    ///   - random: where keys come from.
    ///   - keyStore: the store that keeps the device key: the file store (the default) or a TPM one; it must be
    ///     of the kind the device uses (``DeviceKeyStoreKind/of(directory:)``).
    ///   - ownership: a lock on `directory` that the caller holds and keeps, as for
    ///     ``setUp(in:passcode:configuration:clock:random:keyStore:ownership:allowsEmptyPasscode:)``: the device uses it and never
    ///     releases it. `nil`: the device takes the lock itself and releases it at ``powerOff()``.
    /// - Throws: `DeviceError.Code.stateInUse` when another device owns `directory` (power the previous
    ///   one off first: a reboot in the same process is `powerOff()`, then a new boot);
    ///   `DeviceError.Code.noDevice` when nothing was set up there; `SecureKeysError` with
    ///   `key-file-damaged` for a damaged keybag (left as it is); `DeviceError.Code.keyStoreMismatch` when
    ///   the device keeps its key in the other store; the key store's errors.
    public convenience init(
        bootingFrom directory: String, clock: any Clock<Duration> = ContinuousClock(),
        random: any RandomSource = SystemRandom(),
        keyStore: any DeviceKeyStore = FileDeviceKeyStore(),
        ownership: StateDirectoryLock? = nil
    ) throws {
        try self.init(
            bootingFrom: directory, clock: clock, random: random, keyStore: keyStore, ownership: ownership, plantedFault: nil,
            fileSystem: .real)
    }

    /// Boots the device kept in `directory`, with a bug planted (the simulator's self-test).
    ///
    /// A state that says wiped finishes its erase here, before anything reads a key file: a wipe interrupted
    /// after it recorded itself (a crash, a failed unlink) leaves the keybag and the device key (plain or
    /// sealed) behind, and they are removed, and their folders synced, now — with no TPM needed. A state that is not wiped is checked with the device
    /// key (its integrity tag) and, when it is of format version 1, rewritten as version 2.
    ///
    /// - Throws: as ``init(bootingFrom:clock:random:keyStore:ownership:)``; `DeviceError.Code.wipeIncomplete` when an
    ///   erase cannot be finished; `DeviceError.Code.deviceStateDamaged` for a state file out of range or whose tag
    ///   does not verify; `SecureKeysError` with `key-file-damaged` naming `hardware/uid.key` for a device key
    ///   that is not 32 bytes.
    package convenience init(
        bootingFrom directory: String, clock: any Clock<Duration> = ContinuousClock(),
        random: any RandomSource = SystemRandom(),
        keyStore: any DeviceKeyStore = FileDeviceKeyStore(),
        ownership: StateDirectoryLock? = nil, plantedFault: PlantedFault?, fileSystem: FileSystem
    ) throws {
        // The lock first: a state file read while another device may still write it could be stale.
        let lock = try Self.takeOwnership(of: directory, given: ownership, in: fileSystem)
        let layout = DeviceLayout(root: directory, fileSystem: fileSystem)
        guard SecureFile.exists(layout.statePath) else {
            if SecureFile.exists(layout.setUpMarkerPath) { throw DeviceError.interruptedSetUp(at: directory) }
            throw DeviceError.noDevice(at: directory)
        }
        let contents = try DeviceStateFile.load(from: layout.statePath)
        var state = State(persisted: contents.state)
        if state.persisted.wiped {
            // Roll forward: the erase was decided and recorded; nothing may read its keys again.
            state.wipeRecorded = true
            if plantedFault != .wipeNotRolledForward { try Self.removeKeyFiles(layout) }
        } else {
            let deviceKey = try layout.keyFiles.readDeviceKey(with: keyStore)
            do {
                let keybag = try Keybag.load(from: layout.keybagPath, deviceKey: deviceKey)
                try DeviceStateFile.verify(contents, deviceKey: deviceKey, path: layout.statePath)
                if contents.formatVersion < DeviceStateFile.currentFormatVersion,
                    keybag.options.contains(.authenticatedDeviceState)
                {
                    throw DeviceError.stateDamaged(
                        layout.statePath,
                        "it is an untagged version-1 file, but this device's keybag says its state is authenticated: the file was replaced (a counter set back, say)")
                }
                if contents.formatVersion < DeviceStateFile.currentFormatVersion {
                    try DeviceStateFile.write(state.persisted, deviceKey: deviceKey, to: layout.statePath, in: layout.fileSystem)
                }
                state.deviceKey = deviceKey
                state.keybag = keybag
                state.heldKeys[.none] = try keybag.unwrapNoneClassKey(deviceKey: deviceKey)
            } catch {
                deviceKey.wipe()
                throw error
            }
        }
        if !state.persisted.wiped, state.persisted.attemptPolicy.wipes(afterFailures: state.persisted.failedPasscodeAttempts) {
            // The erasing attempt was counted before it was checked and never resolved (a crash, a failed
            // write): it counts as failed, and the erase happens now.
            for key in state.heldKeys.values { key.wipe() }
            state.heldKeys.removeAll()
            state.deviceKey?.wipe()
            state.deviceKey = nil
            state.keybag = nil
            state.persisted.wiped = true
            do {
                try DeviceStateFile.write(state.persisted, deviceKey: nil, to: layout.statePath, in: layout.fileSystem)
            } catch {
                throw DeviceError.wipeIncomplete(layout.root, cause: error)
            }
            state.wipeRecorded = true
            if plantedFault != .wipeNotRolledForward { try Self.removeKeyFiles(layout) }
        }
        let timekeeper = Timekeeper(clock)
        // A restart must not shorten a passcode delay: it starts again in full from boot.
        if state.persisted.attemptPolicy.delay(afterFailures: state.persisted.failedPasscodeAttempts) > .zero {
            state.lastFailure = timekeeper.now
        }
        self.init(
            layout: layout, state: state, clock: timekeeper, random: random, sealer: keyStore.passcodeSecretSealer,
            ownership: lock, releasesOwnership: ownership == nil)
    }

    /// Makes the folders and the set-up marker, after checking that no device is there.
    ///
    /// Otherwise it finishes off what a set-up that stopped part-way left. Key files without a state file, beside the
    /// marker, protect nothing (no store key can be made before the state file exists), and are removed, durably,
    /// before new ones are written. Key files without a state file and without the marker are a device's whose state
    /// file went. They are never removed, and the result is `device-exists`.
    private static func startSetUp(_ layout: DeviceLayout) throws {
        if SecureFile.exists(layout.statePath) { throw DeviceError.deviceExists(at: layout.root) }
        let leftovers = ([layout.keybagPath] + layout.keyFiles.all).filter(SecureFile.exists)
        if !leftovers.isEmpty {
            guard SecureFile.exists(layout.setUpMarkerPath) else { throw DeviceError.deviceExists(at: layout.root) }
            for path in leftovers { try DiskIO.unlink(path, in: layout.fileSystem) }
            for folder in [layout.deviceDirectory, layout.hardwareDirectory] where SecureFile.exists(folder) {
                try DiskIO.syncDirectory(folder, in: layout.fileSystem)
            }
        }
        try SecureFile.createDirectory(at: layout.deviceDirectory, in: layout.fileSystem)
        try SecureFile.writeAtomically([], to: layout.setUpMarkerPath, replacing: true, in: layout.fileSystem)
        try SecureFile.createDirectory(at: layout.hardwareDirectory, in: layout.fileSystem)
    }

    private init(
        layout: DeviceLayout, state: State, clock: Timekeeper, random: any RandomSource,
        sealer: (any PasscodeSecretSealer)?, ownership: StateDirectoryLock, releasesOwnership: Bool
    ) {
        self.random = random
        self.sealer = sealer
        self.directory = layout.root
        self.layout = layout
        self.clock = clock
        self.state = LockedState(state)
        self.ownership = ownership
        self.releasesOwnership = releasesOwnership
    }

    /// The lock of `directory`.
    ///
    /// This is `given` (checked to be that directory's, and held), or a new one.
    private static func takeOwnership(of directory: String, given: StateDirectoryLock?, in fileSystem: FileSystem) throws -> StateDirectoryLock {
        guard let given else { return try StateDirectoryLock.acquire(directory, in: fileSystem) }
        precondition(
            DiskPath.normalize(given.directory) == DiskPath.normalize(directory),
            "the ownership lock is of \(given.directory), not of the device's directory \(directory)")
        precondition(given.isHeld, "the ownership lock of \(directory) was released")
        return given
    }

    // MARK: Reading the state

    /// Whether the device erased its keys (`wipe-after`).
    ///
    /// If so, every store closes, whatever its class.
    public var hasErasedKeys: Bool { state.withLock { $0.persisted.wiped } }

    /// The format version of the device's keybag, or `nil` once erased.
    ///
    /// In version 2 the TPM checks the passcode.
    package var keybagVersion: UInt8? { state.withLock { $0.keybag?.version } }

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

    /// Whether an erase began and is not finished on disk yet (`DeviceError.Code.wipeIncomplete`).
    ///
    /// The key files may still be there until the next attempt or boot. Package-only, for the simulator's oracle.
    package var isErasePending: Bool { state.withLock { $0.wipePending } }

    /// The files that hold the device's keys, which an erase removes.
    ///
    /// These are the keybag and the device key, plain or sealed. Package-only, for the simulator's oracle.
    package var keyFilePaths: [String] { [layout.keybagPath] + layout.keyFiles.all }

    /// Consecutive wrong passcodes so far (persisted across reboots).
    public var failedPasscodeAttempts: Int { state.withLock { $0.persisted.failedPasscodeAttempts } }

    /// The grace period after a lock.
    public var gracePeriod: Duration { state.withLock { $0.persisted.gracePeriod } }

    /// How long until a passcode may be tried again, or `nil` when it may be tried now.
    public var passcodeRetryDelay: Duration? {
        state.withLock { remainingDelay(in: $0) }
    }

    /// The public half of the class-B key pair.
    ///
    /// It is always available, to seal data while locked.
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

    /// The key of `protectionClass` while it is held.
    ///
    /// Package-only. The simulator checks that keys it saw are wiped; app code asks for store keys instead.
    package func classKey(_ protectionClass: ProtectionClass) -> SecureBytes? {
        refresh()
        return state.withLock { $0.heldKeys[protectionClass] }
    }

    // MARK: Lock and unlock

    /// Unlocks with the passcode.
    ///
    /// It unwraps the class keys (Argon2id) and delivers *did become available*. Unlocking an unlocked device succeeds
    /// and changes nothing.
    ///
    /// - Throws: `DeviceError.Code.wrongPasscode` (counted, persisted), `DeviceError.Code.passcodeDelay`
    ///   during a delay (not counted), `DeviceError.Code.deviceWiped`.
    public func unlock(passcode: SecureBytes) throws { try unlock(passcode: passcode, checkingWhenUnlocked: false) }

    /// Checks the passcode, whether the device is locked or not, as an unlock attempt.
    ///
    /// A wrong one is counted (delay, erase) exactly as ``unlock(passcode:)`` counts it, and a right one unlocks a
    /// locked device. For a command that asks for the passcode to authorise something of its own (an export) on a
    /// device another process may already have unlocked.
    ///
    /// - Throws: as ``unlock(passcode:)``.
    public func authenticate(passcode: SecureBytes) throws { try unlock(passcode: passcode, checkingWhenUnlocked: true) }

    private func unlock(passcode: SecureBytes, checkingWhenUnlocked: Bool) throws {
        refresh()
        // Events the attempt queued go out once its turn is over, so a subscriber may try a passcode itself.
        defer { hub.deliverPending() }
        try attemptTurn.withLock {
            let keybag: Keybag
            let deviceKey: SecureBytes
            switch try state.withLock({ state -> (Keybag, SecureBytes)? in
                try checkAttemptAllowed(&state)
                guard state.isLocked || checkingWhenUnlocked else { return nil }
                return (state.keybag!, state.deviceKey!)
            }) {
            case nil: return
            case let (bag, key)?:
                keybag = bag
                deviceKey = key
            }
            // Argon2id runs outside the state lock, so queries are not held up for its ~80 ms; the attempt turn
            // keeps other attempts waiting until this one is counted.
            let keys = try attempt { try keybag.unlock(passcode: passcode, deviceKey: deviceKey, sealer: sealer) }
            logger.debug("unlocked: class keys unwrapped")
            recordAuthenticatedState(in: keybag, passcode: passcode, deviceKey: deviceKey)
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
        }
    }

    /// Records the authenticated-state option in the keybag of an older device.
    ///
    /// A device set up before its state file was authenticated has a keybag without the option that says so. The first
    /// unlock records it (the option is bound to the wrapped keys, so it needs the passcode). From then on a version-1
    /// state file is refused. Best effort: a failed write leaves the old keybag, intact, and the next unlock tries
    /// again.
    private func recordAuthenticatedState(in keybag: Keybag, passcode: SecureBytes, deviceKey: SecureBytes) {
        guard !keybag.options.contains(.authenticatedDeviceState) else { return }
        do {
            let recorded = try keybag.adding(
                [.authenticatedDeviceState], passcode: passcode, deviceKey: deviceKey, sealer: sealer, random: random)
            try recorded.write(to: layout.keybagPath, in: layout.fileSystem)
            state.withLock { $0.keybag = recorded }
            logger.debug("keybag records that the device state is authenticated")
        } catch {
            logger.debug("keybag not updated; the next unlock tries again", metadata: ["error": "\(error)"])
        }
    }

    /// Locks the device.
    ///
    /// It delivers *will become unavailable* now, and wipes class A and B keys when the grace period ends. Locking a
    /// locked device changes nothing.
    public func lock() { lock(withGracePeriod: true) }

    /// Locks the device and wipes class A and B keys now, with no grace period.
    ///
    /// This is for a device that comes into being while the user's session is already locked (a device set up by
    /// `device serve --session` behind a locked screen), whose keys nobody was using. Delivers *will become
    /// unavailable*, then *did become unavailable*. On a device locked in its grace period, the grace period ends now.
    /// On a locked one, nothing changes.
    public func lockWithoutGracePeriod() { lock(withGracePeriod: false) }

    private func lock(withGracePeriod: Bool) {
        refresh()
        let deadline = state.withLock { state -> Timekeeper.Instant? in
            guard !state.persisted.wiped else { return nil }
            if state.isLocked {
                // Already locked: only a lock without grace cuts a running grace period short.
                guard !withGracePeriod, state.graceDeadline != nil else { return nil }
                state.graceDeadline = clock.now
                return clock.now
            }
            state.isLocked = true
            let deadline = withGracePeriod ? clock.now + state.persisted.gracePeriod : clock.now
            state.graceDeadline = deadline
            hub.enqueue(.willBecomeUnavailable)
            return deadline
        }
        hub.deliverPending()
        guard let deadline else { return }
        guard withGracePeriod else {
            logger.debug("locked with no grace period")
            return refresh()
        }
        logger.debug("locked: class A and B keys stay for the grace period")
        // The grace period ends on the clock (a zero one at once): the keys are wiped then, with no one asking.
        clock.schedule(at: deadline) { [weak self] in self?.refresh() }
    }

    /// Applies what the clock says has happened since the last look.
    ///
    /// It ends a grace period, wiping class A keys and the class B private key. Idempotent; the grace timer and every
    /// query call it.
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

    /// Turns the device off, as before a reboot.
    ///
    /// Every key in memory is zeroed now (class keys, the device key), whoever still holds a reference to one, and the
    /// device answers "nothing available" from then on. The state directory's lock is released (unless the caller
    /// passed it in as `ownership`), so the next boot, in this process or another, may take it. Boot again with
    /// ``init(bootingFrom:clock:random:keyStore:ownership:)``.
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

    /// Changes the passcode.
    ///
    /// The class keys are rewrapped and the keybag replaced atomically, so a crash at any point leaves the old or the
    /// new passcode working, never neither. No store needs rekeying. On a version-2 keybag the TPM checks the old
    /// passcode and seals a new passcode secret under the new one. The sealed secret is inside the keybag, so the same
    /// rename switches both.
    ///
    /// - Parameters:
    ///   - old: the passcode now.
    ///   - new: the new passcode.
    ///   - allowsEmptyPasscode: whether an empty new passcode was asked for explicitly.
    /// - Throws: `DeviceError.Code.invalidDeviceSetting` for an empty new passcode not asked for; as
    ///   ``unlock(passcode:)`` for the old passcode; `SecureKeysError` when the write fails (the old keybag is
    ///   then intact).
    public func changePasscode(from old: SecureBytes, to new: SecureBytes, allowsEmptyPasscode: Bool = false) throws {
        try DeviceRules.checkNewPasscode(new, allowsEmpty: allowsEmptyPasscode)
        refresh()
        defer { hub.deliverPending() }
        try attemptTurn.withLock {
            let (keybag, deviceKey) = try state.withLock { state -> (Keybag, SecureBytes) in
                try checkAttemptAllowed(&state)
                return (state.keybag!, state.deviceKey!)
            }
            let changed = try attempt {
                try keybag.changingPasscode(from: old, to: new, deviceKey: deviceKey, sealer: sealer, random: random)
            }
            try changed.write(to: layout.keybagPath, in: layout.fileSystem)
            state.withLock { $0.keybag = changed }
        }
        logger.debug("passcode changed: class keys rewrapped")
    }

    /// Moves the keybag to version 2, checking `passcode` as an unlock attempt (counted).
    ///
    /// The class keys stay the same, now also wrapped with a passcode secret the key store's TPM seals under an
    /// authValue derived from the passcode, so the TPM checks and counts every later passcode. The new keybag is
    /// written atomically (a temporary file, `fsync`, `rename`, `fsync` of the folder). Until the rename the old keybag
    /// is the device's, and after it the new one, whatever crash comes between. The lock state does not change.
    ///
    /// - Parameter passcode: the device's passcode.
    /// - Returns: `true` when the keybag was moved, `false` when it was version 2 already (the passcode is then
    ///   checked all the same).
    /// - Throws: `DeviceError.Code.invalidDeviceSetting` when the key store seals no passcode secret (the file
    ///   store); as ``unlock(passcode:)``; `SecureKeysError` when the write fails (the old keybag is intact).
    @discardableResult
    public func sealPasscodeSecret(passcode: SecureBytes) throws -> Bool {
        guard let sealer else {
            throw DeviceError.invalidSetting(
                "a keybag moves to version 2 only on a device whose key the TPM keeps: move the device key first (`protected-store device migrate-key --to tpm`)")
        }
        refresh()
        defer { hub.deliverPending() }
        let moved = try attemptTurn.withLock { () throws -> Bool in
            let (keybag, deviceKey) = try state.withLock { state -> (Keybag, SecureBytes) in
                try checkAttemptAllowed(&state)
                return (state.keybag!, state.deviceKey!)
            }
            if keybag.version == Keybag.passcodeSecretFormatVersion {
                try attempt { try keybag.unlock(passcode: passcode, deviceKey: deviceKey, sealer: sealer) }.wipeAll()
                return false
            }
            let moved = try attempt {
                try keybag.sealingPasscodeSecret(passcode: passcode, deviceKey: deviceKey, sealer: sealer, random: random)
            }
            try FaultPoint.reach(.keybagMoveSealed)
            try moved.write(to: layout.keybagPath, in: layout.fileSystem)
            state.withLock { $0.keybag = moved }
            return true
        }
        logger.debug("keybag moved to version 2: the TPM checks the passcode")
        return moved
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
    /// - Throws: `DeviceError.Code.protectedDataUnavailable` when the class key is not held (or is wiped
    ///   while the key is made); `SecureKeysError` with `store-exists-without-key` when a store file exists without a key file,
    ///   `already-exists` when the key file exists.
    public func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes {
        guard let classKey = classKey(protectionClass) else { throw DeviceError.protectedDataUnavailable(protectionClass) }
        logger.debug("creating store key", metadata: ["store": "\(storePath)", "class": "\(protectionClass)"])
        do {
            return try StoreKeyFile.create(
                at: StoreFiles(database: storePath).key, forStoreAt: storePath, protectionClass: protectionClass,
                classKey: classKey, random: random, in: layout.fileSystem)
        } catch let error as SecureKeysError where error.code == .keyWiped {
            // The class key was wiped (a grace period ended) after it was taken: locked, not a failure. The new key
            // is wrapped before its file is written, so nothing was written.
            throw DeviceError.protectedDataUnavailable(protectionClass)
        }
    }

    /// What the header of the store's key file records, or `nil` without a key file.
    ///
    /// The header records the store's identifier, class and store format. It is read while locked too, as the store key
    /// stays wrapped.
    ///
    /// - Throws: `SecureKeysError` when the key file is damaged or not a regular file.
    public func storeKeyRecord(forStoreAt storePath: String) throws -> StoreKeyRecord? {
        try StoreKeyRecord.ofKeyFile(forStoreAt: storePath)
    }

    /// The key file of the store at `storePath` wrapped again to record `format` (nothing is written), for a
    /// rewrite of the store (`migrate`).
    ///
    /// - Throws: `DeviceError.Code.protectedDataUnavailable` when the store's class key is not held; the key
    ///   file's `SecureKeysError`s.
    /// Moves the store key file beside the store at `storePath` to the store at `destination`, on the device's
    /// file system, as the key source's ``StoreKeyProvider/moveStoreKey(from:to:)`` describes.
    ///
    /// - Throws: as ``StoreKeyProvider/moveStoreKey(from:to:)``.
    public func moveStoreKey(from storePath: String, to destination: String) throws {
        try moveStoreKeyFile(from: storePath, to: destination, in: layout.fileSystem)
    }

    public func storeKeyFile(forStoreAt storePath: String, recording format: StoreFormat) throws -> StoreKeyFile {
        let keyPath = StoreFiles(database: storePath).key
        let file = try StoreKeyFile.load(from: keyPath)
        guard let classKey = classKey(file.protectionClass) else {
            throw DeviceError.protectedDataUnavailable(file.protectionClass)
        }
        do {
            return try file.recording(format, classKey: classKey, path: keyPath, random: random)
        } catch let error as SecureKeysError where error.code == .keyWiped {
            throw DeviceError.protectedDataUnavailable(file.protectionClass)  // wiped after it was taken
        }
    }

    // MARK: Passcode attempts

    private func remainingDelay(in state: State) -> Duration? {
        let delay = state.persisted.attemptPolicy.delay(afterFailures: state.persisted.failedPasscodeAttempts)
        guard delay > .zero, let lastFailure = state.lastFailure else { return nil }
        let remaining = lastFailure + delay - clock.now
        return remaining > .zero ? remaining : nil
    }

    /// Refuses an attempt on a wiped device or during a delay.
    ///
    /// On a wiped device it first finishes the erase, if it is not finished.
    private func checkAttemptAllowed(_ state: inout State) throws {
        if state.persisted.wiped {
            if state.wipePending { try finishWipe(&state) }
            throw DeviceError.deviceWiped()
        }
        if let remaining = remainingDelay(in: state) {
            throw DeviceError.passcodeDelay(remaining: remaining, failedAttempts: state.persisted.failedPasscodeAttempts)
        }
    }

    /// Runs a passcode check, counted before it runs and reset on success. The caller holds the attempt turn.
    ///
    /// The attempt is written to the state file as failed *before* the passcode is checked, as a phone's
    /// secure element counts it: a write that fails refuses the attempt unchecked, and a crash or a reboot
    /// before the answer leaves it counted — a full or failing disk never buys a free guess. A right passcode
    /// then sets the count back to 0.
    ///
    /// An attempt refused because its count could not be written was never answered, so it need not count: when
    /// only the folder's sync failed, the file may hold the higher count until a power cut drops the rename. A
    /// boot in between reads it and delays the next attempt; after the cut the last durable count is the count
    /// (<doc:/SecureKeys/KeyFileFormats>, "Counting a passcode attempt").
    private func attempt<Result>(_ body: () throws -> Result) throws -> Result {
        // Counted on disk first, then in memory: what the device says is what a reboot finds.
        let previousFailures = try state.withLock { state -> Int in
            let previous = state.persisted.failedPasscodeAttempts
            var counted = state.persisted
            counted.failedPasscodeAttempts = PasscodeAttemptPolicy.failures(afterOneMore: state.persisted.failedPasscodeAttempts)
            // Never past the erase limit: a count can already be there, unresolved, when a right passcode's reset
            // to 0 failed to write (the file may even hold 0 if only its folder's sync failed). This attempt then
            // counts as the limit again: a wrong passcode erases, a right one sets it back to 0. A count past
            // the limit is one the state file's range check calls damaged.
            if let limit = counted.attemptPolicy.wipeAfterFailures, counted.failedPasscodeAttempts > limit {
                counted.failedPasscodeAttempts = limit
            }
            try DeviceStateFile.write(counted, deviceKey: state.deviceKey, to: layout.statePath, in: layout.fileSystem)
            state.persisted = counted
            return previous
        }
        do {
            let result = try body()
            try state.withLock { state in
                var reset = state.persisted
                reset.failedPasscodeAttempts = 0
                try DeviceStateFile.write(reset, deviceKey: state.deviceKey, to: layout.statePath, in: layout.fileSystem)
                state.persisted = reset
                state.lastFailure = nil
            }
            return result
        } catch let error as DeviceError where [.tpmLockout, .tpmUnavailable, .tpmFailure].contains(error.code) {
            // The TPM did not answer whether the passcode is right — in lockout, unreachable, or refusing for
            // another reason: the attempt was never answered, so the count goes back to what it was (a failed
            // write leaves it counted, the safe side). A TPM that stops answering then never brings the device
            // closer to its erase. A wrong passcode the TPM did check is counted by the TPM itself.
            state.withLock { state in
                var restored = state.persisted
                restored.failedPasscodeAttempts = previousFailures
                if (try? DeviceStateFile.write(restored, deviceKey: state.deviceKey, to: layout.statePath, in: layout.fileSystem)) != nil {
                    state.persisted = restored
                }
            }
            logger.debug("passcode not checked: the TPM did not answer", metadata: ["error": "\(error.code)"])
            throw error
        } catch let error as SecureKeysError where error.code == .wrongPasscode {
            throw try state.withLock { state -> DeviceError in
                // The file says so already: the attempt was counted before it was checked.
                let failures = state.persisted.failedPasscodeAttempts
                state.lastFailure = clock.now
                logger.debug("wrong passcode", metadata: ["failed-attempts": "\(failures)"])
                if state.persisted.attemptPolicy.wipes(afterFailures: failures) {
                    logger.debug("too many wrong passcodes: erasing the device")
                    try wipe(&state)
                    return DeviceError.deviceWiped()
                }
                return DeviceError.wrongPasscode(
                    failedAttempts: failures, delay: state.persisted.attemptPolicy.delay(afterFailures: failures))
            }
        }
    }

    /// Erases the device.
    ///
    /// The keybag and the device key are destroyed, so nothing wrapped by them can be read again. This is the user's
    /// "Erase Data after 10 failed attempts" setting, never a recovery step.
    ///
    /// In memory the device is wiped at once: every key zeroed, no passcode tried again. On disk the erase
    /// first records itself (`wiped: true`, durable), then removes the key files and syncs their folders;
    /// boot finishes an erase that recorded itself, so a crash in between cannot keep the keys.
    ///
    /// - Throws: `DeviceError.Code.wipeIncomplete` when a step fails: the erase is then finished at the next
    ///   attempt or boot, and nothing says erased before it is.
    private func wipe(_ state: inout State) throws {
        // Every class goes, `none` included: every subscriber hears it, whatever class its store has.
        let hadKeys = !state.heldKeys.isEmpty
        state.persisted.wiped = true
        state.wipePending = true
        for key in state.heldKeys.values { key.wipe() }
        state.heldKeys.removeAll()
        state.deviceKey?.wipe()
        state.deviceKey = nil
        state.keybag = nil
        if hadKeys { hub.enqueue(.didBecomeUnavailable) }
        try finishWipe(&state)
    }

    /// The erase on disk, from wherever it stopped.
    ///
    /// It records the erase, then removes the key files.
    private func finishWipe(_ state: inout State) throws {
        if !state.wipeRecorded {
            do {
                if case .fail(let code)? = FaultPoint.planned(at: .wipeRecording, path: layout.statePath) {
                    throw SecureKeysError.io("cannot write", path: layout.statePath, errno: code)
                }
                try DeviceStateFile.write(state.persisted, deviceKey: nil, to: layout.statePath, in: layout.fileSystem)
            } catch {
                throw DeviceError.wipeIncomplete(layout.root, cause: error)
            }
            state.wipeRecorded = true
        }
        try FaultPoint.reach(.wipeRecorded)
        try Self.removeKeyFiles(layout)
        state.wipePending = false
    }

    /// Removes the keybag and the device key, and syncs their folders.
    ///
    /// The device key goes as its file and its sealed blob, whichever store kept it, so no TPM is needed to erase. The
    /// keys are removed for good only once the folders are synced, as a power cut must not bring them back. A missing
    /// file is not an error, so this finishes any erase.
    ///
    /// - Throws: `DeviceError.Code.wipeIncomplete` naming the file that stays.
    private static func removeKeyFiles(_ layout: DeviceLayout) throws {
        let files = layout.keyFiles
        do {
            for path in [layout.keybagPath, files.plainKeyPath, files.sealedKeyPath] {
                if case .fail(let code)? = FaultPoint.planned(at: .wipeRemovingKeyFile, path: path) {
                    throw SecureKeysError.io("cannot remove", path: path, errno: code)
                }
                try DiskIO.unlink(path, in: layout.fileSystem)
            }
            try DiskIO.syncDirectory(SecureFile.folder(containing: layout.keybagPath), in: layout.fileSystem)
            try DiskIO.syncDirectory(SecureFile.folder(containing: layout.deviceKeyPath), in: layout.fileSystem)
        } catch {
            throw DeviceError.wipeIncomplete(layout.root, cause: error)
        }
    }
}

extension Duration {
    /// Whole milliseconds.
    var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}

extension FaultPoint {
    /// An erase records the wiped state.
    ///
    /// With ``FaultPoint/Effect/fail(_:)``, nothing is removed.
    package static let wipeRecording = FaultPoint("wipe recording")
    /// An erase recorded the wiped state durably, before a key file is removed (a crash there is rolled forward
    /// at the next boot).
    package static let wipeRecorded = FaultPoint("wipe recorded")
    /// An erase removes a key file.
    ///
    /// The file is the keybag, the device key or the sealed device key, picked by the plan's path suffix
    /// (``FaultPoint/Effect/fail(_:)``).
    package static let wipeRemovingKeyFile = FaultPoint("wipe removing a key file")
    /// A move of the keybag to version 2 sealed the passcode secret, before the new keybag is written (the
    /// write itself stops at ``FaultPoint/atomicWrite(_:)``).
    package static let keybagMoveSealed = FaultPoint("keybag move sealed")
}
