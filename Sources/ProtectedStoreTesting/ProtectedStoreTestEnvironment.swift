package import DiskModel
import Foundation
@_exported public import ProtectedData
@_exported @_spi(Testing) public import ProtectedStore
public import SecureKeys

/// A device, a manual clock and data controllers on a temporary directory, for an app's own tests.
///
/// It plays the role `NIOEmbedded` plays for swift-nio: nothing sleeps, nothing races, every helper returns once the
/// app is idle.
///
/// ```swift
/// import ProtectedStoreTesting
///
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
///
/// `import ProtectedStoreTesting` brings `ProtectedStore` and the simulated device (`ProtectedData`) with it.
@MainActor
public final class ProtectedStoreTestEnvironment {
    /// The virtual clock every part shares.
    ///
    /// ``advance(by:)`` moves it and runs what became due.
    public let clock = ManualClock()
    /// The state directory (removed when the environment goes away).
    public let stateDirectory: String
    /// The passcode the device was set up with.
    public let passcode: String
    /// The device, a new instance after ``reboot()``.
    public private(set) var device: KeybagDevice
    /// Controllers made by ``makeController(_:queueCapacity:)`` that are still alive.
    private var controllers: [DataController] = []
    /// The disk model over the state directory, for a simulation (``init(passcode:gracePeriod:simulatingDisk:)``).
    package let disk: SimulatedDisk?
    /// The file system the device and the stores write in: the disk's, when there is one.
    package var fileSystem: FileSystem { disk.map(FileSystem.simulated) ?? .real }

    /// Sets up an unlocked device with Argon2id at its minimal cost (a test passcode is no secret).
    ///
    /// - Parameters:
    ///   - passcode: the device's passcode.
    ///   - gracePeriod: how long class A and B keys stay after a lock.
    /// - Throws: when the temporary state directory cannot be written.
    public convenience init(passcode: String = "1234", gracePeriod: Duration = .seconds(10)) throws {
        try self.init(passcode: passcode, gracePeriod: gracePeriod, simulatingDisk: false)
    }

    /// Sets up an unlocked device as ``init(passcode:gracePeriod:)`` does, on a disk model of the state directory
    /// when `simulatingDisk` (the model then records the set-up too).
    package init(passcode: String = "1234", gracePeriod: Duration = .seconds(10), simulatingDisk: Bool) throws {
        self.passcode = passcode
        stateDirectory = NSTemporaryDirectory() + "protected-store-testing-\(UUID().uuidString)"
        if simulatingDisk {
            try SecureFile.createDirectory(at: stateDirectory, in: .real)
            disk = SimulatedDisk(root: stateDirectory)
        } else {
            disk = nil
        }
        device = try KeybagDevice.setUp(
            in: stateDirectory, passcode: try SecureBytes(utf8: passcode),
            configuration: .init(gracePeriod: gracePeriod, kdf: .minimal), clock: clock,
            fileSystem: disk.map(FileSystem.simulated) ?? .real)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: stateDirectory)
    }

    /// A store path inside the state directory.
    ///
    /// - Parameter name: the database file's name.
    public func storePath(_ name: String = "app.sqlite") -> String { stateDirectory + "/" + name }

    /// A store configuration for a store in the state directory.
    ///
    /// Change its schema or inbox handling before passing it to ``makeController(_:queueCapacity:)``.
    ///
    /// - Parameters:
    ///   - name: the database file's name.
    ///   - protectionClass: when the store can be read.
    public func storeConfiguration(_ name: String = "app.sqlite", protectionClass: ProtectionClass = .complete) -> StoreConfiguration {
        StoreConfiguration(path: storePath(name), protectionClass: protectionClass)
    }

    /// A controller for `store`, on this environment's device and clock.
    ///
    /// - Parameters:
    ///   - store: the store (``storeConfiguration(_:protectionClass:)`` by default).
    ///   - queueCapacity: how many operations may wait.
    public func makeController(_ store: StoreConfiguration? = nil, queueCapacity: Int = 100_000) -> DataController {
        var store = store ?? storeConfiguration()
        store.fileSystem = fileSystem
        let controller = DataController(configuration: .init(store: store, queueCapacity: queueCapacity), keys: device, clock: clock)
        controllers.append(controller)
        return controller
    }

    /// Makes a controller, launches it, and waits until the attach finished.
    ///
    /// - Parameters:
    ///   - options: why the app launched.
    ///   - store: the store (``storeConfiguration(_:protectionClass:)`` by default).
    public func launch(_ options: LaunchOptions = LaunchOptions(), store: StoreConfiguration? = nil) async -> DataController {
        let controller = makeController(store)
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

    /// Unlocks with the passcode and settles.
    ///
    /// Deferred setups run and queues drain.
    ///
    /// - Throws: what the device's unlock throws (a passcode delay, for instance).
    public func unlock() async throws {
        try device.unlock(passcode: try SecureBytes(utf8: passcode))
        await settle()
    }

    /// Moves the clock and settles.
    ///
    /// Moving the clock runs what became due: the end of the grace period, operation deadlines, delayed attaches.
    ///
    /// - Parameter duration: how far.
    public func advance(by duration: Duration) async {
        clock.advance(by: duration)
        await settle()
    }

    /// Kills the app's process.
    ///
    /// The controller stops where it stands, with no clean-up.
    ///
    /// - Parameter controller: the app's controller.
    public func crash(_ controller: DataController) {
        controller.abandon()
        controllers.removeAll { $0 === controller }
    }

    /// Reboots the device.
    ///
    /// Every app dies, every key in memory is zeroed, and the new device is before its first unlock.
    ///
    /// - Throws: what booting the device throws.
    public func reboot() async throws {
        try await powerOff(then: {})
    }

    /// Cuts the power, runs `whileOff`, and boots the device again.
    ///
    /// This is for simulation only. When the power goes every app dies and every key in memory is zeroed. In
    /// `whileOff` a simulated disk's power cut rewrites the files as the disk kept them.
    ///
    /// - Parameter whileOff: what happens while the device is off.
    /// - Throws: what `whileOff` throws; what booting the device throws.
    package func powerOff(then whileOff: () throws -> Void) async throws {
        for controller in controllers { controller.abandon() }
        controllers.removeAll()
        device.powerOff()
        try whileOff()
        device = try KeybagDevice(bootingFrom: stateDirectory, clock: clock, plantedFault: nil, fileSystem: fileSystem)
    }
}
