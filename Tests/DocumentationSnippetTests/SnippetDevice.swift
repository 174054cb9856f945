import Foundation
import ProtectedStoreTesting

/// The simulated device the documentation's code runs on, seen through `ProtectedStore`'s types only.
///
/// This is the one file of the target that imports `ProtectedStoreTesting`. A snippet file imports exactly
/// what its documentation block shows (and `Testing`), and the target builds with `MemberImportVisibility`:
/// a block that says `import ProtectedStore` is all it needs compiles with that import alone.
@MainActor
final class SnippetDevice {
    private let environment: ProtectedStoreTestEnvironment

    /// An unlocked device on a temporary directory (removed when this goes away), on a manual clock.
    init() throws {
        environment = try ProtectedStoreTestEnvironment()
    }

    /// The app's documents folder: the device's temporary directory.
    var documents: String { environment.stateDirectory }

    /// The device, as the controller's source of keys. A new one after ``reboot()``.
    var keys: any DataController.KeySource { environment.device }

    /// Locks the device; the grace period starts on the manual clock.
    func lock() { environment.device.lock() }

    /// Unlocks the device with its passcode.
    func unlock() throws { try environment.device.unlock(passcode: try SecureBytes(utf8: environment.passcode)) }

    /// Reboots the device: every key in memory is gone until the next unlock.
    func reboot() async throws { try await environment.reboot() }

    /// Creates `store` (its key, its inbox key pair) on the unlocked device and closes it again.
    func create(_ store: StoreConfiguration) async {
        let controller = DataController(configuration: .init(store: store), keys: keys)
        controller.launch(LaunchOptions())
        await waitForPhase(controller) { $0 == .ready }
        await controller.terminate()
    }

    /// Creates `store`, reboots the device, and launches a controller on it, which waits for the first unlock.
    func launchBeforeFirstUnlock(_ store: StoreConfiguration) async throws -> DataController {
        await create(store)
        try await reboot()
        let controller = DataController(configuration: .init(store: store), keys: keys)
        controller.launch(LaunchOptions(reason: .location, inBackground: true))
        await waitForPhase(controller) { $0 == .waitingForProtectedData }
        return controller
    }
}

/// Waits until `controller` is in a phase `predicate` accepts (the phase sequence yields the current one first).
@MainActor
func waitForPhase(_ controller: DataController, _ predicate: (DataController.Phase) -> Bool) async {
    for await phase in controller.phases() where predicate(phase) { return }
}

/// A path for a device's state directory that does not exist yet, in a new temporary folder.
func temporaryStateDirectory() -> String {
    let parent = NSTemporaryDirectory() + "protected-store-snippets-\(UUID().uuidString)"
    try! FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: false,
                                             attributes: [.posixPermissions: 0o700])
    return parent + "/phone"
}

/// A new, empty temporary folder of the test's own (mode 0700).
var temporaryFolder: String { (temporaryStateDirectory() as NSString).deletingLastPathComponent }

/// Removes the temporary folder `temporaryStateDirectory()` made.
func removeDirectory(_ stateDirectory: String) {
    try? FileManager.default.removeItem(atPath: (stateDirectory as NSString).deletingLastPathComponent)
}

/// Launches a controller on a new device until its store is ready, then terminates it: what a launch logs.
@MainActor
func launchOnce() async throws {
    let device = try SnippetDevice()
    await device.create(StoreConfiguration(path: device.documents + "/app.sqlite"))
}
