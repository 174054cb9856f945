import TestSupport
import Foundation
import SecureKeys


@testable import ProtectedData
import StoreConcurrency

/// A device on a temporary directory with a manual clock and the minimal Argon2id cost.
final class DeviceFixture: @unchecked Sendable {
    let directory = TemporaryDirectory()
    let clock = ManualClock()
    let passcode = "1234"
    var device: KeybagDevice

    init(gracePeriod: Duration = .seconds(10), wipeAfterFailures: Int? = nil) throws {
        device = try KeybagDevice.setUp(
            in: directory.path, passcode: try SecureBytes(utf8: "1234"),
            configuration: .init(
                gracePeriod: gracePeriod, attemptPolicy: .init(wipeAfterFailures: wipeAfterFailures), kdf: .minimal),
            clock: clock)
    }

    /// A new device instance on the same directory: a reboot. The old one is powered off first, as a phone
    /// is: two devices never own one directory at once.
    func reboot() throws {
        device.powerOff()
        device = try KeybagDevice(bootingFrom: directory.path, clock: clock)
    }

    func unlock(_ passcode: String? = nil) throws {
        try device.unlock(passcode: try SecureBytes(utf8: passcode ?? self.passcode))
    }

    /// Moves the clock; the device's grace timer fires inside the advance.
    func advance(_ duration: Duration) async {
        clock.advance(by: duration)
    }

    var available: Set<ProtectionClass> { device.availability.availableClasses }
}

/// Collects the events a subscriber receives.
final class EventRecorder: Sendable {
    private let recorded = LockedState<[ProtectedDataEvent]>([])
    var events: [ProtectedDataEvent] { recorded.withLock { $0 } }
    func record(_ event: ProtectedDataEvent) { recorded.withLock { $0.append(event) } }
}

func errorCode(_ body: () throws -> Void) -> String? {
    do {
        try body()
        return nil
    } catch let error as DeviceError {
        return error.code.name
    } catch let error as SecureKeysError {
        return error.code.name
    } catch {
        return "unexpected: \(error)"
    }
}
