import TestSupport
import Foundation
import ProtectedData
import SecureKeys

@_spi(Testing) @testable import ProtectedStore

/// A device and a data controller on a temporary directory, sharing one manual clock.
@MainActor
final class ControllerFixture {
    let directory = TemporaryDirectory()
    let clock = ManualClock()
    var device: KeybagDevice
    var controller: DataController
    var protectionClass: ProtectionClass
    var queueCapacity: Int
    var attachDelay: Duration
    /// Names of operations that ran, in the order they ran.
    var ran: [String] = []
    /// Every error presented to the user.
    var presented: [StoreError] = []
    /// How the store applies inbox records (the app version's handlers).
    var inboxHandlers = InboxHandlers.keyValue
    /// The schema's migrations (the app version's).
    var migrator = DatabaseMigrator.keyValue
    /// The connections' settings.
    var database = Database.Configuration()

    var storePath: String { directory.file("app.sqlite") }

    init(protectionClass: ProtectionClass = .complete, queueCapacity: Int = 100, attachDelay: Duration = .zero) throws {
        self.protectionClass = protectionClass
        self.queueCapacity = queueCapacity
        self.attachDelay = attachDelay
        device = try KeybagDevice.setUp(
            in: directory.path, passcode: try SecureBytes(utf8: "1234"), configuration: .init(kdf: .minimal), clock: clock)
        controller = DataController(
            configuration: .init(store: .init(path: directory.file("app.sqlite"))), keys: device, clock: clock)
        controller = makeController()
    }

    func makeController() -> DataController {
        var configuration = DataController.Configuration(
            store: .init(
                path: storePath, protectionClass: protectionClass, database: database, migrator: migrator,
                inboxHandlers: inboxHandlers),
            queueCapacity: queueCapacity)
        configuration.attachDelay = attachDelay
        let controller = DataController(configuration: configuration, keys: device, clock: clock)
        controller.observe { [unowned self] event in
            if case .errorPresented(let error) = event { presented.append(error) }
        }
        return controller
    }

    /// The app's process ends and the device reboots: a new device instance and a new controller.
    func rebootDevice() async throws {
        await controller.terminate()
        device.powerOff()
        device = try KeybagDevice(bootingFrom: directory.path, clock: clock)
        controller = makeController()
    }

    func launch(_ options: LaunchOptions = LaunchOptions()) async {
        controller.launch(options)
        await controller.waitUntilIdle()
    }

    func unlock() async throws {
        try device.unlock(passcode: try SecureBytes(utf8: "1234"))
        await controller.waitUntilIdle()
    }

    func lock() async {
        device.lock()
        await controller.waitUntilIdle()
    }

    func advance(_ duration: Duration) async {
        clock.advance(by: duration)
        await controller.waitUntilIdle()
    }

    /// A UI operation that records its name when it runs.
    @discardableResult
    func ui(_ name: String, deadline: Duration? = nil) throws -> OperationTicket {
        try controller.submit(name, deadline: deadline) { [unowned self] _ in ran.append(name) }
    }

    /// A UI-facing write.
    @discardableResult
    func put(_ key: String, _ value: String) throws -> OperationTicket {
        try controller.submit("put \(key)") { [unowned self] coordinator in
            try await coordinator.put(key, value)
            ran.append("put \(key)")
        }
    }

    func value(_ key: String) async throws -> String? {
        try await controller.perform("get \(key)") { try await $0.value(forKey: key) }
    }

    /// Starts the store's creation as a launch would and stops it once the key is made, as a crash there would:
    /// the key file and the creation marker are on disk, nothing of the store.
    ///
    /// - Returns: the store's files.
    func interruptCreationAfterTheKey() throws -> StoreFiles {
        let key = try StoreCoordinator.createStoreKey(.init(path: storePath), keys: device).key
        key.wipe()
        return StoreFiles(database: storePath)
    }
}

func fileBytes(_ path: String) -> [UInt8] {
    FileManager.default.contents(atPath: path).map(Array.init) ?? []
}

extension OperationOutcome {
    /// The outcome as a word tests compare: `completed`, `cancelled`, `expired`, `failed(store-damaged)`.
    var word: String {
        switch self {
        case .failed(let error as StoreError): "failed(\(error.code))"
        default: description
        }
    }
}
