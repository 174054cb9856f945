import Foundation
internal import Logging
public import ProtectedData
public import SecureKeys
internal import TPMKeys
import StoreConcurrency

/// A real device on a Linux desktop, locked by the user's session.
///
/// It runs the keybag state machine of a `KeybagDevice` (passcode, class keys, grace period, wrong-passcode
/// delays, persisted in a state directory) on the real clock (`ContinuousClock`), locked by the user's session
/// through a ``SessionLockSource``.
///
/// Lock events only ever take keys away: the session's lock (`LockedHint`, logind's `Lock`, a screen saver's
/// `ActiveChanged(true)`), `PrepareForSleep(true)` and a lost system bus call ``lock()`` — the grace period
/// runs, then the class A keys and the class B private key are wiped, exactly as on the simulated device. The
/// session's *unlocked* is never an authorization: it is only reported (``subscribeToSessionEvents(_:)``), so a
/// UI can ask for the passcode, and the keys come back only with ``unlock(passcode:)``.
///
/// It is a `KeyAvailabilityMonitor` and a `StoreKeyProvider`, delegating to its device, so a
/// `DataController` uses it as it uses a simulated device, with no other change to app code.
///
/// A device is set up only by ``setUp(in:passcode:configuration:systemBus:sessionBus:keyStore:)``, never implicitly;
/// ``init(bootingFrom:systemBus:sessionBus:keyStore:)`` boots an existing one (before its first unlock, as after a
/// reboot). Call ``close()`` when done: it stops the lock source and powers the device off.
public final class SessionDevice: KeyAvailabilityMonitor, StoreKeyProvider {
    /// The keybag state machine.
    public let device: KeybagDevice
    /// The session's lock, followed on its own thread.
    public let lockSource: SessionLockSource
    private let sessionEvents: EventHub<SessionLockEvent>

    /// Sets up a new device in `directory` and follows the session.
    ///
    /// The device is left unlocked, as after a phone's set-up. If the session already is locked, the device is locked
    /// at once, class A and B keys wiped with no grace period.
    ///
    /// - Parameters:
    ///   - directory: the state directory; created when missing.
    ///   - passcode: the device's passcode.
    ///   - configuration: grace period, wrong-passcode policy and Argon2id cost.
    ///   - systemBus: where logind is (``Bus/system``; a test passes its own bus explicitly).
    ///   - sessionBus: where the screen-saver fallback listens, or `nil` for none.
    ///   - keyStore: where the device key is kept; `nil`: sealed by the machine's TPM when one answers at
    ///     `TPMDeviceKeyStore.defaultTCTI`, else a 0600 file (`TPMDeviceKeyStore.automatic(for:tcti:)`).
    /// - Throws: `DeviceError.Code.noBus`, `DeviceError.Code.noLogind`, `DeviceError.Code.noSession`
    ///   before anything is written; then as `KeybagDevice/setUp(in:passcode:configuration:clock:random:ownership:allowsEmptyPasscode:)`
    ///   (`DeviceError.Code.deviceExists`: a device is never replaced).
    public static func setUp(
        in directory: String, passcode: SecureBytes, configuration: KeybagDevice.Configuration = .init(),
        systemBus: Bus = .system, sessionBus: Bus? = .session, keyStore: (any DeviceKeyStore)? = nil
    ) throws -> SessionDevice {
        try SessionDevice(systemBus: systemBus, sessionBus: sessionBus) {
            try makeDevice(.setUp(passcode: passcode, configuration: configuration), in: directory, keyStore: keyStore)
        }
    }

    /// Boots the device kept in `directory` and follows the session.
    ///
    /// Only class `none` is available until the first ``unlock(passcode:)``.
    ///
    /// - Parameters:
    ///   - directory: the state directory of a device set up before.
    ///   - systemBus: where logind is (``Bus/system``; a test passes its own bus explicitly).
    ///   - sessionBus: where the screen-saver fallback listens, or `nil` for none.
    ///   - keyStore: where the device key is kept; `nil`: the store the device's files say it uses
    ///     (`TPMDeviceKeyStore.automatic(for:tcti:)`).
    /// - Throws: `DeviceError.Code.noBus`, `DeviceError.Code.noLogind`, `DeviceError.Code.noSession`;
    ///   as `KeybagDevice/init(bootingFrom:clock:random:ownership:)` (`DeviceError.Code.noDevice` when
    ///   nothing was set up: set up explicitly, it is never done here).
    public convenience init(
        bootingFrom directory: String, systemBus: Bus = .system, sessionBus: Bus? = .session,
        keyStore: (any DeviceKeyStore)? = nil
    ) throws {
        try self.init(systemBus: systemBus, sessionBus: sessionBus) {
            try Self.makeDevice(.boot, in: directory, keyStore: keyStore)
        }
    }

    /// How the keybag state machine is made.
    private enum Making {
        case setUp(passcode: SecureBytes, configuration: KeybagDevice.Configuration)
        case boot
    }

    /// The one place a session device's keybag state machine is made, on the real clock.
    ///
    /// It is where its key store is chosen.
    private static func makeDevice(
        _ making: Making, in directory: String, keyStore: (any DeviceKeyStore)?
    ) throws -> KeybagDevice {
        let keyStore = keyStore ?? TPMDeviceKeyStore.automatic(for: directory)
        switch making {
        case .setUp(let passcode, let configuration):
            return try KeybagDevice.setUp(
                in: directory, passcode: passcode, configuration: configuration, clock: ContinuousClock(), keyStore: keyStore)
        case .boot:
            return try KeybagDevice(bootingFrom: directory, clock: ContinuousClock(), keyStore: keyStore)
        }
    }

    /// Starts the lock source first, then makes the device.
    ///
    /// Nothing is written if the session cannot be followed. A lock seen in between is applied as soon as the device
    /// exists.
    private init(systemBus: Bus, sessionBus: Bus?, makeDevice: () throws -> KeybagDevice) throws {
        let target = LockTarget()
        let hub = EventHub<SessionLockEvent>()
        let logger = LogSubsystem.device.makeLogger()
        let source = try SessionLockSource(systemBus: systemBus, sessionBus: sessionBus) { event in
            if event.takesKeysAway {
                logger.debug("session lock: locking the device", metadata: ["event": "\(event)"])
                target.lock()
            } else {
                logger.debug("session unlock reported; the device stays locked until its passcode", metadata: ["event": "\(event)"])
            }
            hub.enqueue(event)
            hub.deliverPending()
        }
        let device: KeybagDevice
        do {
            device = try makeDevice()
        } catch {
            source.stop()
            throw error
        }
        self.device = device
        self.lockSource = source
        self.sessionEvents = hub
        let status = source.status
        target.attach(device, sessionLocked: status.isLocked || status.sleeping)
    }

    // MARK: Lock and unlock

    /// Unlocks with the passcode.
    ///
    /// This is the only way keys come back, and only while the session's lock is followed.
    ///
    /// Once the system bus is lost the device is locked and stays so: with nothing to tell it of a later lock,
    /// keys brought back would stay until the process ends. The app closes this device and boots it again
    /// (``init(bootingFrom:systemBus:sessionBus:keyStore:)``) when the bus is back, as the device agent's unit
    /// restarts the agent.
    ///
    /// - Throws: `DeviceError.Code.noBus` when the system bus was lost, before or during the unlock (the device
    ///   is locked then, and the passcode was not tried when it was lost before); otherwise as
    ///   `KeybagDevice/unlock(passcode:)`.
    public func unlock(passcode: SecureBytes) throws {
        let systemBus = lockSource.status.systemBus
        guard lockSource.status.connected else { throw DeviceError.busLost(systemBus) }
        try device.unlock(passcode: passcode)
        // Lost while the passcode was checked: the lock it reported may have come before the keys came back.
        guard lockSource.status.connected else {
            device.lock()
            throw DeviceError.busLost(systemBus)
        }
    }

    /// Locks the device now, as a session lock does.
    public func lock() { device.lock() }

    /// Whether the device is locked, and what its keys are doing.
    public var lockState: KeybagDevice.LockState { device.lockState }

    /// Registers `handler` for every later session event, on the lock source's thread.
    ///
    /// The events are locks, and the *unlocked* reports a UI answers with its passcode prompt.
    ///
    /// - Returns: the subscription; delivery ends when it is cancelled or released.
    public func subscribeToSessionEvents(_ handler: @escaping @Sendable (SessionLockEvent) -> Void) -> EventSubscription {
        sessionEvents.subscribe(handler)
    }

    /// Stops the lock source and powers the device off.
    ///
    /// The lock source's thread is joined. Every key in memory is zeroed and the state directory is free for the next
    /// boot.
    public func close() {
        lockSource.stop()
        device.powerOff()
    }

    deinit { lockSource.stop() }

    // MARK: KeyAvailabilityMonitor and StoreKeyProvider, by the device

    /// Whether data of `protectionClass` can be read now, as the device answers.
    public func isProtectedDataAvailable(for protectionClass: ProtectionClass) -> Bool {
        device.isProtectedDataAvailable(for: protectionClass)
    }

    /// The device's protected-data events, with its availability read atomically.
    public func subscribe(
        _ handler: @escaping @Sendable (ProtectedDataEvent) -> Void
    ) -> (availability: ProtectedDataAvailability, subscription: EventSubscription) {
        device.subscribe(handler)
    }

    /// Whether the device erased its keys after too many wrong passcodes.
    public var hasErasedKeys: Bool { device.hasErasedKeys }

    /// The store's key from the device, looked up three ways.
    public func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup {
        try device.lookUpStoreKey(forStoreAt: storePath)
    }

    /// Creates a new store's key on the device.
    ///
    /// - Throws: as `KeybagDevice/createStoreKey(forStoreAt:protectionClass:)`.
    public func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes {
        try device.createStoreKey(forStoreAt: storePath, protectionClass: protectionClass)
    }

    /// What the device records of the store's key (its key file's header), or `nil` without one.
    ///
    /// - Throws: as `KeybagDevice/storeKeyRecord(forStoreAt:)`.
    public func storeKeyRecord(forStoreAt storePath: String) throws -> StoreKeyRecord? {
        try device.storeKeyRecord(forStoreAt: storePath)
    }

    /// The store's key file wrapped again to record `format`, by the device (for `migrate`).
    public func storeKeyFile(forStoreAt storePath: String, recording format: StoreFormat) throws -> StoreKeyFile {
        try device.storeKeyFile(forStoreAt: storePath, recording: format)
    }
}

/// The device a lock source's events lock.
///
/// It is not there yet while the device is being made; then a lock is remembered and applied at
/// ``attach(_:sessionLocked:)``, with no grace period, as is the session's lock then.
private final class LockTarget: Sendable {
    private struct State {
        var device: KeybagDevice?
        var lockedBeforeAttach = false
    }

    private let state = LockedState(State())

    func lock() {
        let device = state.withLock { state -> KeybagDevice? in
            if state.device == nil { state.lockedBeforeAttach = true }
            return state.device
        }
        device?.lock()
    }

    func attach(_ device: KeybagDevice, sessionLocked: Bool) {
        let locks = state.withLock { state -> Bool in
            state.device = device
            return state.lockedBeforeAttach || sessionLocked
        }
        // Locked when it came into being: its keys were never in use, so no grace period keeps them.
        if locks { device.lockWithoutGracePeriod() }
    }
}
