import Foundation
import LinuxDevice
import ProtectedData
import SecureKeys
import TestSupport
import Testing

/// A session device on a mock logind: session locks take keys away after the grace period, and nothing the
/// session says brings them back — only the passcode does.
@Suite("SessionDevice", .serialized, .enabled(if: MockBuses.available, Comment(rawValue: MockBuses.missing)))
struct SessionDeviceTests {
    static let passcode = "1234"
    static let configuration = KeybagDevice.Configuration(gracePeriod: .milliseconds(300), kdf: .minimal)

    /// A device set up on `directory`, with a class-A store key made while it is unlocked.
    struct Fixture {
        let logind: MockLogind
        let directory = TemporaryDirectory()
        let device: SessionDevice
        let events = Recorder<ProtectedDataEvent>()
        let sessionEvents = Recorder<SessionLockEvent>()
        let subscriptions: [EventSubscription]
        let storePath: String

        init(logind: MockLogind? = nil, sessionBus: PrivateBus? = nil) throws {
            let logind = try logind ?? MockLogind()
            self.logind = logind
            device = try SessionDevice.setUp(
                in: directory.path, passcode: SecureBytes(utf8: SessionDeviceTests.passcode),
                configuration: SessionDeviceTests.configuration, systemBus: logind.bus.bus, sessionBus: sessionBus?.bus)
            let events = self.events
            let sessionEvents = self.sessionEvents
            subscriptions = [
                device.subscribe { events.record($0) }.subscription,
                device.subscribeToSessionEvents { sessionEvents.record($0) },
            ]
            storePath = directory.file("app.sqlite")
            let key = try device.createStoreKey(forStoreAt: storePath, protectionClass: .complete)
            key.wipe()
        }

        var classAStoreKeyAvailable: Bool {
            guard case .available(let key) = try? device.lookUpStoreKey(forStoreAt: storePath) else { return false }
            key.wipe()
            return true
        }

        func unlock() throws { try device.unlock(passcode: SecureBytes(utf8: SessionDeviceTests.passcode)) }
    }

    @Test("SetLockedHint(true) locks the device; after the grace period class-A keys are wiped, class C stays")
    func lockedHintLocks() async throws {
        let fixture = try Fixture()
        defer { fixture.device.close() }
        #expect(fixture.classAStoreKeyAvailable)
        try fixture.logind.setLockedHint(true)
        #expect(await eventually { !fixture.device.isProtectedDataAvailable(for: .complete) })
        #expect(fixture.device.lockState == .locked)
        #expect(!fixture.device.isProtectedDataAvailable(for: .completeUnlessOpen))
        #expect(fixture.device.isProtectedDataAvailable(for: .completeUntilFirstUserAuthentication))
        #expect(!fixture.classAStoreKeyAvailable)
        // Through the grace period, as the simulated device does: told first, wiped at its end.
        #expect(fixture.events.all == [.willBecomeUnavailable, .didBecomeUnavailable])
    }

    @Test("after the system bus is lost, unlock(passcode:) is refused with no-bus and the device stays locked")
    func unlockRefusedAfterBusLoss() async throws {
        let fixture = try Fixture()
        defer { fixture.device.close() }
        fixture.logind.stop()  // the bus itself goes: a lock
        #expect(await eventually { fixture.device.lockState == .locked })
        #expect(await eventually { !fixture.device.isProtectedDataAvailable(for: .complete) })
        #expect(!fixture.device.lockSource.status.connected)
        let error = #expect(throws: DeviceError.self) { try fixture.unlock() }
        #expect(error?.code == .noBus, "\(String(describing: error))")
        #expect(error?.message.contains("can no longer be followed") == true, "\(String(describing: error))")
        #expect(fixture.device.lockState == .locked)
        #expect(!fixture.device.isProtectedDataAvailable(for: .complete))
        #expect(!fixture.classAStoreKeyAvailable)
    }

    @Test("LockedHint false is reported, never an unlock: the keys stay away until unlock(passcode:)")
    func unlockedHintIsNotAuthorization() async throws {
        let fixture = try Fixture()
        defer { fixture.device.close() }
        try fixture.logind.setLockedHint(true)
        #expect(await eventually { !fixture.device.isProtectedDataAvailable(for: .complete) })
        try fixture.logind.setLockedHint(false)
        // The unlock was seen and passed on to the app...
        #expect(await eventually { fixture.sessionEvents.all.contains(.unlocked(.lockedHint)) })
        try await Task.sleep(for: .milliseconds(100))
        // ...and changed nothing.
        #expect(fixture.device.lockState == .locked)
        #expect(!fixture.device.isProtectedDataAvailable(for: .complete))
        #expect(!fixture.classAStoreKeyAvailable)
        #expect(!fixture.events.all.contains(.didBecomeAvailable))
        // The passcode brings them back.
        try fixture.unlock()
        #expect(fixture.device.lockState == .unlocked)
        #expect(fixture.classAStoreKeyAvailable)
        #expect(fixture.events.all.last == .didBecomeAvailable)
    }

    @Test("PrepareForSleep(true) locks the device as a screen lock does")
    func sleepLocks() async throws {
        let fixture = try Fixture()
        defer { fixture.device.close() }
        try fixture.logind.prepareForSleep(true)
        #expect(await eventually { !fixture.device.isProtectedDataAvailable(for: .complete) })
        #expect(!fixture.classAStoreKeyAvailable)
        try fixture.logind.prepareForSleep(false)
        #expect(await eventually { fixture.sessionEvents.all == [.sleeping, .resumed] })
        #expect(fixture.device.lockState == .locked)
    }

    @Test("a screen saver's ActiveChanged(true) on the session bus locks the device where LockedHint is never set")
    func screenSaverLocks() async throws {
        let sessionBus = try PrivateBus()
        let saver = try MockService(template: "gnome_screensaver", name: "org.gnome.ScreenSaver", on: sessionBus, systemBus: false)
        defer { saver.stop() }
        let fixture = try Fixture(sessionBus: sessionBus)
        defer { fixture.device.close() }
        try MockControl.run(
            on: sessionBus, "dbus.Interface(obj('/org/gnome/ScreenSaver', 'org.gnome.ScreenSaver'), 'org.gnome.ScreenSaver').SetActive(True)")
        #expect(await eventually { !fixture.device.isProtectedDataAvailable(for: .complete) })
        #expect(!fixture.device.lockSource.status.lockedHintSeen)
    }

    @Test("boot never sets a device up (no-device, nothing written); a booted device, once unlocked, locks with the session")
    func bootFollowsTheSession() async throws {
        let logind = try MockLogind()
        let directory = TemporaryDirectory()
        // Nothing set up: boot refuses, and writes nothing.
        #expect(throws: DeviceError.self) { _ = try SessionDevice(bootingFrom: directory.path, systemBus: logind.bus.bus, sessionBus: nil) }
        #expect(!FileManager.default.fileExists(atPath: directory.file("device")))
        try SessionDevice.setUp(
            in: directory.path, passcode: SecureBytes(utf8: Self.passcode), configuration: Self.configuration,
            systemBus: logind.bus.bus, sessionBus: nil
        ).close()
        let device = try SessionDevice(bootingFrom: directory.path, systemBus: logind.bus.bus, sessionBus: nil)
        defer { device.close() }
        #expect(device.lockState == .beforeFirstUnlock)
        try device.unlock(passcode: SecureBytes(utf8: Self.passcode))
        #expect(device.isProtectedDataAvailable(for: .complete))
        try logind.setLockedHint(true)
        #expect(await eventually { !device.isProtectedDataAvailable(for: .complete) })
    }

    @Test("a device set up while the session is already locked comes up locked, class A and B keys wiped with no grace period")
    func setUpWhileLocked() throws {
        let logind = try MockLogind()
        try logind.setLockedHint(true)
        let directory = TemporaryDirectory()
        let device = try SessionDevice.setUp(
            in: directory.path, passcode: SecureBytes(utf8: Self.passcode),
            configuration: .init(gracePeriod: .seconds(3600), kdf: .minimal), systemBus: logind.bus.bus, sessionBus: nil)
        defer { device.close() }
        #expect(device.lockState == .locked)
        #expect(!device.isProtectedDataAvailable(for: .complete))
        #expect(!device.isProtectedDataAvailable(for: .completeUnlessOpen))
        #expect(device.isProtectedDataAvailable(for: .completeUntilFirstUserAuthentication))
        try device.unlock(passcode: SecureBytes(utf8: Self.passcode))
        #expect(device.isProtectedDataAvailable(for: .complete))
    }

    @Test("a session that cannot be followed refuses the device before anything is written")
    func noSessionWritesNothing() throws {
        let logind = try MockLogind(processInSession: false, addSession: false)
        let directory = TemporaryDirectory()
        #expect {
            _ = try SessionDevice.setUp(
                in: directory.file("state"), passcode: SecureBytes(utf8: Self.passcode), configuration: Self.configuration,
                systemBus: logind.bus.bus, sessionBus: nil)
        } throws: { ($0 as? DeviceError)?.code == .noSession }
        #expect(!FileManager.default.fileExists(atPath: directory.file("state")))
    }
}
