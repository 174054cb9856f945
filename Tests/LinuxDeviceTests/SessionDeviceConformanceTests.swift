import Foundation
import LinuxDevice
import ProtectedData
import ProtectedStoreTesting
import SecureKeys
import TestSupport
import Testing

/// The key-source conformance suite against the session device, locked by the session (a mock logind's
/// LockedHint) and unlocked by the passcode.
@Suite("SessionDevice key-source conformance", .serialized, .enabled(if: MockBuses.available, Comment(rawValue: MockBuses.missing)))
struct SessionDeviceConformanceTests {
    @Test("the session device keeps the key-source contract, locked through logind")
    func sessionDeviceConforms() async throws {
        let logind = try MockLogind()
        let directory = TemporaryDirectory()
        let device = try SessionDevice.setUp(
            in: directory.path, passcode: SecureBytes(utf8: "1234"),
            configuration: KeybagDevice.Configuration(gracePeriod: .zero, kdf: .minimal),
            systemBus: logind.bus.bus, sessionBus: nil)
        defer { device.close() }
        let stores = directory.file("stores")
        try FileManager.default.createDirectory(atPath: stores, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        // The suite calls lock and unlock one at a time, from this test's task: the mock is never used at once.
        nonisolated(unsafe) let session = logind
        let failures = await StoreKeySourceConformance.check(
            device, storesIn: stores,
            lock: { device in
                try session.setLockedHint(true)
                #expect(await eventually { !device.isProtectedDataAvailable(for: .complete) }, "the session's lock never reached the device")
            },
            unlock: { device in
                try session.setLockedHint(false)
                try device.unlock(passcode: SecureBytes(utf8: "1234"))
            })
        #expect(failures.isEmpty, "\(failures)")
    }
}
