public import Clocks
import Foundation
public import ProtectedStore
public import SecureKeys

/// A device, a test clock and data controllers on a temporary directory, for an app's own tests — the role
/// `NIOEmbedded` plays for swift-nio: nothing sleeps, nothing races, every helper returns once the app is
/// idle.
///
/// ```swift
/// @Test @MainActor func queuedSaveRunsAfterUnlock() async throws {
///     let environment = try ProtectedStoreTestEnvironment()
///     try await environment.reboot()                               // before first unlock
///     let controller = await environment.launch(LaunchOptions(reason: .location))
///     try controller.submit("save") { try await $0.put("k", "v") }
///     #expect(controller.queuedOperationNames == ["save"])
///     try await environment.unlock()
///     #expect(controller.phase == .ready && controller.queuedOperationCount == 0)
/// }
/// ```
@MainActor
public final class ProtectedStoreTestEnvironment {
    /// The virtual clock every part shares.
    public let clock = TestClock<Duration>()
    /// The state directory (removed when the environment goes away).
    public let stateDirectory: String
    /// The passcode the device was set up with.
    public let passcode: String
    /// The device; a new instance after ``reboot()``.
    public private(set) var device: SimulatedDevice
    /// Controllers made by ``makeController(protectionClass:storeName:queueCapacity:)`` that are still alive.
    private var controllers: [DataController] = []

    /// Sets up an unlocked device with Argon2id at its minimal cost (a test passcode is no secret).
    public init(passcode: String = "1234", gracePeriod: Duration = .seconds(10)) throws {
        self.passcode = passcode
        stateDirectory = NSTemporaryDirectory() + "protected-store-testing-\(UUID().uuidString)"
        device = try SimulatedDevice.setUp(
            in: stateDirectory, passcode: SecureBytes(utf8: passcode),
            configuration: .init(gracePeriod: gracePeriod, kdf: .minimal), clock: clock, schedulesTimers: false)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: stateDirectory)
    }

    /// A store path inside the state directory.
    public func storePath(_ name: String = "app.sqlite") -> String { stateDirectory + "/" + name }

    /// A controller for a store in the state directory, on this environment's device and clock.
    public func makeController(
        protectionClass: ProtectionClass = .complete, storeName: String = "app.sqlite", queueCapacity: Int = 100_000
    ) -> DataController {
        var configuration = DataController.Configuration(
            store: StoreConfiguration(path: storePath(storeName), protectionClass: protectionClass),
            queueCapacity: queueCapacity)
        configuration.schedulesTimers = false  // advance(by:) tells the controller the clock moved
        let controller = DataController(configuration: configuration, keys: device, clock: clock)
        controllers.append(controller)
        return controller
    }

    /// Makes a controller, launches it, and waits until the attach finished.
    public func launch(
        _ options: LaunchOptions = LaunchOptions(), protectionClass: ProtectionClass = .complete, storeName: String = "app.sqlite"
    ) async -> DataController {
        let controller = makeController(protectionClass: protectionClass, storeName: storeName)
        controller.launch(options)
        await settle()
        return controller
    }

    /// Waits until every live controller is idle.
    public func settle() async {
        for controller in controllers { await controller.waitUntilIdle() }
    }

    /// Locks the device (the grace period starts) and settles.
    public func lock() async {
        device.lock()
        await settle()
    }

    /// Unlocks with the passcode and settles: deferred setups run, queues drain.
    public func unlock() async throws {
        try device.unlock(passcode: SecureBytes(utf8: passcode))
        await settle()
    }

    /// Moves the clock, applies the device's deadlines and the controllers' (attach delays, operation
    /// deadlines), and settles.
    public func advance(by duration: Duration) async {
        await clock.advance(by: duration)
        device.refresh()
        for controller in controllers { controller.clockDidAdvance() }
        await settle()
    }

    /// Kills the app's process: the controller stops where it stands, with no clean-up.
    public func crash(_ controller: DataController) {
        controller.abandon()
        controllers.removeAll { $0 === controller }
    }

    /// Reboots the device: every app dies, every key in memory is zeroed, and the new device is before its
    /// first unlock.
    public func reboot() async throws {
        for controller in controllers { controller.abandon() }
        controllers.removeAll()
        device.powerOff()
        device = try SimulatedDevice(bootingFrom: stateDirectory, clock: clock, schedulesTimers: false)
    }
}
