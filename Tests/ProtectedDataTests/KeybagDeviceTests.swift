import TestSupport
import Clocks
import Foundation
import SecureKeys
import Testing

@testable import ProtectedData

@Suite("Simulated device: lock states and class keys")
struct KeybagDeviceTests {
    @Test("set-up leaves the device unlocked with every class available, and a second set-up is refused")
    func setUpLeavesDeviceUnlocked() throws {
        let fixture = try DeviceFixture()
        #expect(fixture.device.lockState == .unlocked)
        #expect(fixture.available == Set(ProtectionClass.allCases))
        // While the first device runs, the directory is its own; once it is off, the set-up finds the device.
        #expect(errorCode { _ = try KeybagDevice.setUp(in: fixture.directory.path, passcode: try SecureBytes(utf8: "9")) } == "state-in-use")
        fixture.device.powerOff()
        #expect(errorCode { _ = try KeybagDevice.setUp(in: fixture.directory.path, passcode: try SecureBytes(utf8: "9")) } == "device-exists")
        let mode = try (FileManager.default.attributesOfItem(atPath: fixture.directory.file("device"))[.posixPermissions] as! NSNumber).intValue
        #expect(mode == 0o700)
    }

    @Test("booting a directory with no device fails with no-device")
    func bootWithoutDevice() {
        let directory = TemporaryDirectory()
        #expect(errorCode { _ = try KeybagDevice(bootingFrom: directory.path, clock: TestClock<Duration>()) } == "no-device")
    }

    @Test("after a reboot only class none is available until the first unlock, then every class")
    func rebootBeforeFirstUnlock() throws {
        let fixture = try DeviceFixture()
        try fixture.reboot()
        #expect(fixture.device.lockState == .beforeFirstUnlock)
        #expect(fixture.available == [.none])
        fixture.device.lock()
        #expect(fixture.device.lockState == .beforeFirstUnlock)
        try fixture.unlock()
        #expect(fixture.device.lockState == .unlocked)
        #expect(fixture.available == Set(ProtectionClass.allCases))
    }

    @Test("unlocking an unlocked device succeeds, delivers nothing and changes nothing")
    func unlockWhenUnlocked() throws {
        let fixture = try DeviceFixture()
        let recorder = EventRecorder()
        let (_, subscription) = fixture.device.subscribe(recorder.record)
        let key = try #require(fixture.device.classKey(.complete))
        try fixture.unlock()
        #expect(recorder.events.isEmpty)
        #expect(fixture.device.classKey(.complete) === key)
        subscription.cancel()
    }

    @Test("lock: class A and B stay available through 9.999 s of a 10 s grace period and are wiped at 10 s; C and D stay")
    func gracePeriodBoundary() async throws {
        let fixture = try DeviceFixture()
        let recorder = EventRecorder()
        let (_, subscription) = fixture.device.subscribe(recorder.record)
        let classA = try #require(fixture.device.classKey(.complete))
        let classB = try #require(fixture.device.classKey(.completeUnlessOpen))
        fixture.device.lock()
        #expect(recorder.events == [.willBecomeUnavailable])
        #expect(fixture.device.lockState == .lockedInGracePeriod(remaining: .seconds(10)))

        await fixture.advance(.milliseconds(9999))
        #expect(fixture.available == Set(ProtectionClass.allCases))
        #expect(fixture.device.lockState == .lockedInGracePeriod(remaining: .milliseconds(1)))
        #expect(!classA.isWiped)

        await fixture.advance(.milliseconds(1))
        #expect(fixture.available == [.completeUntilFirstUserAuthentication, .none])
        #expect(fixture.device.lockState == .locked)
        #expect(recorder.events == [.willBecomeUnavailable, .didBecomeUnavailable])
        #expect(classA.isWiped)
        #expect(classB.isWiped)
        #expect(fixture.device.completeUnlessOpenPublicKey?.count == 32)
        subscription.cancel()
    }

    @Test("lockWithoutGracePeriod wipes class A and B keys at once, whatever the grace period; in a grace period it ends it")
    func lockWithoutGracePeriod() async throws {
        let fixture = try DeviceFixture()
        let recorder = EventRecorder()
        let (_, subscription) = fixture.device.subscribe(recorder.record)
        let classA = try #require(fixture.device.classKey(.complete))
        fixture.device.lockWithoutGracePeriod()
        #expect(fixture.device.lockState == .locked)
        #expect(fixture.available == [.completeUntilFirstUserAuthentication, .none])
        #expect(recorder.events == [.willBecomeUnavailable, .didBecomeUnavailable])
        #expect(classA.isWiped)
        fixture.device.lockWithoutGracePeriod()
        #expect(recorder.events.count == 2, "a locked device changed: \(recorder.events)")

        try fixture.unlock()
        fixture.device.lock()
        #expect(fixture.device.lockState == .lockedInGracePeriod(remaining: .seconds(10)))
        fixture.device.lockWithoutGracePeriod()
        #expect(fixture.device.lockState == .locked)
        #expect(!fixture.device.isProtectedDataAvailable(for: .completeUnlessOpen))
        #expect(
            recorder.events == [
                .willBecomeUnavailable, .didBecomeUnavailable, .didBecomeAvailable, .willBecomeUnavailable, .didBecomeUnavailable,
            ])
        subscription.cancel()
    }

    @Test("a zero grace period wipes class A at the lock itself")
    func zeroGracePeriod() throws {
        let fixture = try DeviceFixture(gracePeriod: .zero)
        fixture.device.lock()
        #expect(!fixture.device.isProtectedDataAvailable(for: .complete))
        #expect(fixture.device.isProtectedDataAvailable(for: .completeUntilFirstUserAuthentication))
    }

    @Test("unlocking within the grace period keeps the same class keys and delivers did-become-available")
    func unlockWithinGracePeriod() async throws {
        let fixture = try DeviceFixture()
        let recorder = EventRecorder()
        let (_, subscription) = fixture.device.subscribe(recorder.record)
        let classA = try #require(fixture.device.classKey(.complete))
        fixture.device.lock()
        await fixture.advance(.seconds(5))
        try fixture.unlock()
        await fixture.advance(.seconds(60))
        #expect(fixture.device.classKey(.complete) === classA)
        #expect(!classA.isWiped)
        #expect(recorder.events == [.willBecomeUnavailable, .didBecomeAvailable])
        subscription.cancel()
    }

    @Test("unlock after the grace period restores class A with the same key bytes")
    func unlockAfterGracePeriod() async throws {
        let fixture = try DeviceFixture()
        let before = try fixture.device.classKey(.complete)!.withUnsafeBytes { Array($0) }
        fixture.device.lock()
        await fixture.advance(.seconds(10))
        #expect(!fixture.device.isProtectedDataAvailable(for: .complete))
        try fixture.unlock()
        #expect(try fixture.device.classKey(.complete)!.withUnsafeBytes { Array($0) } == before)
    }

    @Test("powering off zeroes every key in memory, even ones still referenced elsewhere")
    func powerOffWipesKeys() throws {
        let fixture = try DeviceFixture()
        let keys = ProtectionClass.allCases.compactMap { fixture.device.classKey($0) }
        #expect(keys.count == 4)
        fixture.device.powerOff()
        #expect(keys.allSatisfy { $0.isWiped })
        #expect(fixture.available.isEmpty)
    }

    @Test("class C survives lock and grace period, and is gone after a reboot")
    func classCUntilReboot() async throws {
        let fixture = try DeviceFixture()
        fixture.device.lock()
        await fixture.advance(.seconds(3600))
        #expect(fixture.device.isProtectedDataAvailable(for: .completeUntilFirstUserAuthentication))
        try fixture.reboot()
        #expect(!fixture.device.isProtectedDataAvailable(for: .completeUntilFirstUserAuthentication))
    }
}
