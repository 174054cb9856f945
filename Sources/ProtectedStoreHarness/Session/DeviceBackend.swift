import DiskModel
import ProtectedData
import ProtectedStore
import SecureKeys

/// The device's lock state, what is available and the failed passcode attempts, as a session reports them.
typealias DeviceFacts = (lockState: KeybagDevice.LockState, availability: ProtectedDataAvailability, failedAttempts: Int)

/// The device a scenario session's device commands go to.
///
/// This is the device in this process, or the device agent that serves the state directory.
///
/// The session runs each device command once, on whichever backend it has; the backend decides what the
/// command means where the device lives (an agent cannot cut this process's power, say).
@MainActor
protocol DeviceBackend: AnyObject {
    /// The device's facts, `nil` when no device is set up.
    var facts: DeviceFacts? { get }

    /// What the app asks for keys and availability.
    ///
    /// - Throws: `no-device` when no device is set up.
    func keys() throws -> any KeyAvailabilityMonitor & StoreKeyProvider

    /// Sets up a device.
    ///
    /// It is left unlocked.
    ///
    /// - Throws: `device-exists` when there is one; the device's errors for a setting outside its rules.
    func setUp(passcode: SecureBytes, gracePeriod: Duration, wipeAfterFailures: Int?, allowsEmptyPasscode: Bool) throws

    /// Powers the device off and boots it again before the first unlock.
    ///
    /// `endApp` runs between the two, as the app dies with the device.
    func reboot(endingApp endApp: () -> Void) throws

    /// Cuts the power and boots the device again from what the disk kept.
    ///
    /// The device goes, `endApp` runs, and `cut` does to the disk what the cut does.
    func cutPower(endingApp endApp: () -> Void, _ cut: () throws -> Void) throws

    /// Checks that `command` may simulate a power cut of this process's disk.
    ///
    /// - Throws: `needs-own-device` when a device agent owns the device.
    func checkOwnsDisk(for command: String) throws

    /// Locks the device.
    func lock() throws

    /// Unlocks the device.
    func unlock(passcode: SecureBytes) throws

    /// Changes the passcode.
    func changePasscode(from old: SecureBytes, to new: SecureBytes, allowsEmptyPasscode: Bool) throws

    /// Checks a `clock advance` of `duration` at virtual time `now`, and moves the device's clock where it is
    /// not the session's own (an agent's). The session moves its own clock after.
    func advanceDeviceClock(by duration: Duration, from now: Duration) throws
}

/// The `no-device` error, with the command that sets one up.
let noScenarioDevice = DeviceError(code: .noDevice, message: "no device is set up; run `device setup --passcode P` first")

/// The device in this process.
///
/// It is a keybag device in the state directory, owned through the session's lock.
@MainActor
final class InProcessDevice: DeviceBackend {
    /// The device, once set up or booted.
    private(set) var device: KeybagDevice?
    /// The bug planted in the device at each boot (the simulator's self-test).
    var plantedFault: PlantedFault?
    private let stateDirectory: String
    private let clock: ManualClock
    private let keyStore: any DeviceKeyStore
    private let ownership: StateDirectoryLock
    private let kdf: PasscodeKDF
    /// The session's file system, which the device's files are written in.
    private let fileSystem: FileSystem

    /// Takes the device kept in `stateDirectory`, booting it when one is set up there.
    ///
    /// - Throws: what booting the device throws (a damaged keybag, for instance).
    init(
        stateDirectory: String, clock: ManualClock, keyStore: any DeviceKeyStore, ownership: StateDirectoryLock,
        kdf: PasscodeKDF, fileSystem: FileSystem
    ) throws {
        self.stateDirectory = stateDirectory
        self.fileSystem = fileSystem
        self.clock = clock
        self.keyStore = keyStore
        self.ownership = ownership
        self.kdf = kdf
        try bootIfSetUp()
    }

    /// Boots the device kept in the state directory, if one is set up there.
    private func bootIfSetUp() throws {
        guard SecureFile.exists(stateDirectory + "/device/state.json") else { return }
        device = try KeybagDevice(
            bootingFrom: stateDirectory, clock: clock, keyStore: keyStore, ownership: ownership, plantedFault: plantedFault, fileSystem: fileSystem)
    }

    private func requireDevice() throws -> KeybagDevice {
        guard let device else { throw noScenarioDevice }
        return device
    }

    var facts: DeviceFacts? {
        device.map { ($0.lockState, $0.availability, $0.failedPasscodeAttempts) }
    }

    func keys() throws -> any KeyAvailabilityMonitor & StoreKeyProvider { try requireDevice() }

    func setUp(passcode: SecureBytes, gracePeriod: Duration, wipeAfterFailures: Int?, allowsEmptyPasscode: Bool) throws {
        // The session's own device owns the directory, so a set-up would be refused as state-in-use: say
        // what it would find instead.
        if device != nil { throw DeviceError.deviceExists(at: stateDirectory) }
        device = try KeybagDevice.setUp(
            in: stateDirectory, passcode: passcode,
            configuration: .init(gracePeriod: gracePeriod, attemptPolicy: .init(wipeAfterFailures: wipeAfterFailures), kdf: kdf),
            clock: clock, keyStore: keyStore, ownership: ownership, allowsEmptyPasscode: allowsEmptyPasscode, fileSystem: fileSystem)
    }

    func reboot(endingApp endApp: () -> Void) throws {
        try requireDevice().powerOff()
        endApp()
        device = try KeybagDevice(
            bootingFrom: stateDirectory, clock: clock, keyStore: keyStore, ownership: ownership, plantedFault: plantedFault, fileSystem: fileSystem)
    }

    func cutPower(endingApp endApp: () -> Void, _ cut: () throws -> Void) throws {
        device?.powerOff()
        endApp()
        device = nil
        try cut()
        try bootIfSetUp()
    }

    func checkOwnsDisk(for command: String) throws {}

    func lock() throws { try requireDevice().lock() }

    func unlock(passcode: SecureBytes) throws { try requireDevice().unlock(passcode: passcode) }

    func changePasscode(from old: SecureBytes, to new: SecureBytes, allowsEmptyPasscode: Bool) throws {
        try requireDevice().changePasscode(from: old, to: new, allowsEmptyPasscode: allowsEmptyPasscode)
    }

    func advanceDeviceClock(by duration: Duration, from now: Duration) throws {
        // The device counts on the session's clock.
        try DeviceRules.checkClockAdvance(by: duration, from: now)
    }
}

/// The device a `protected-store device serve` agent owns, reached through its client.
///
/// The device's commands go to the agent, and the app asks it for the store's key.
@MainActor
final class AgentDevice: DeviceBackend {
    /// The agent's client.
    let client: DeviceAgentClient

    /// Sends the device's commands through `client`.
    init(_ client: DeviceAgentClient) {
        self.client = client
    }

    var facts: DeviceFacts? {
        let status = client.lastKnownStatus
        return status.lockState.map { ($0, status.availability, status.failedPasscodeAttempts) }
    }

    func keys() throws -> any KeyAvailabilityMonitor & StoreKeyProvider {
        guard client.lastKnownStatus.lockState != nil else { throw noScenarioDevice }
        return client
    }

    func setUp(passcode: SecureBytes, gracePeriod: Duration, wipeAfterFailures: Int?, allowsEmptyPasscode: Bool) throws {
        try client.setUp(
            passcode: passcode, gracePeriod: gracePeriod, wipeAfterFailures: wipeAfterFailures,
            allowsEmptyPasscode: allowsEmptyPasscode)
    }

    func reboot(endingApp endApp: () -> Void) throws {
        try client.reboot()
        endApp()
    }

    func cutPower(endingApp endApp: () -> Void, _ cut: () throws -> Void) throws {
        try checkOwnsDisk(for: "device power-cut")
    }

    func checkOwnsDisk(for command: String) throws {
        // The agent's own calls (the device's files) happen in its process, out of this process's reach.
        throw StoreError(
            code: .init("needs-own-device"),
            message: "\(command) simulates this process's disk, and a device agent owns the device: "
                + "stop the agent, or cut the power in a session without one")
    }

    func lock() throws { try client.lock() }

    func unlock(passcode: SecureBytes) throws { try client.unlock(passcode: passcode) }

    func changePasscode(from old: SecureBytes, to new: SecureBytes, allowsEmptyPasscode: Bool) throws {
        try client.changePasscode(from: old, to: new, allowsEmptyPasscode: allowsEmptyPasscode)
    }

    func advanceDeviceClock(by duration: Duration, from now: Duration) throws {
        // The device's clock is the agent's; the app's timers run on this process's.
        try client.advanceClock(by: duration)
    }
}
