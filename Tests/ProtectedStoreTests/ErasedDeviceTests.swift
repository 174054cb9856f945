import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// A device that erases itself (`wipe-after`) while the app runs: whatever its class, the store closes, for
/// its keys are gone for good — where a lock leaves a class B, C or D store open.
@MainActor
@Suite struct ErasedDeviceTests {
    @Test("an erase while the app runs closes a class C store and it never attaches again; a lock alone leaves it open",
          arguments: [ProtectionClass.completeUntilFirstUserAuthentication, .completeUnlessOpen, .none])
    func eraseClosesAStoreOfAnyClass(protectionClass: ProtectionClass) async throws {
        let fixture = try ControllerFixture(protectionClass: protectionClass)
        fixture.device.powerOff()
        fixture.device = try KeybagDevice.setUp(
            in: fixture.directory.file("erasing"), passcode: try SecureBytes(utf8: "1234"),
            configuration: .init(attemptPolicy: .init(wipeAfterFailures: 2), kdf: .minimal), clock: fixture.clock)
        fixture.controller = fixture.makeController()
        await fixture.launch()
        #expect(fixture.controller.phase == .ready)
        await fixture.lock()
        await fixture.advance(.seconds(60))
        #expect(fixture.controller.phase == .ready, "a lock leaves a class-\(protectionClass.name) store open")
        for _ in 0..<2 { _ = try? fixture.device.unlock(passcode: try SecureBytes(utf8: "0000")) }
        await fixture.controller.waitUntilIdle()
        #expect(fixture.device.lockState == .wiped)
        #expect(fixture.controller.phase == .waitingForProtectedData, "the erased device's store is still \(fixture.controller.phase)")
        #expect(fixture.controller.coordinator == nil)
    }
}
