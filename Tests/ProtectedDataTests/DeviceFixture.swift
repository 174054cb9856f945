import TestSupport
import Clocks
import Foundation
import SecureKeys


@testable import ProtectedData

/// A device on a temporary directory with a test clock and the minimal Argon2id cost.
final class DeviceFixture: @unchecked Sendable {
    let directory = TemporaryDirectory()
    let clock = TestClock<Duration>()
    let passcode = "1234"
    var device: SimulatedDevice

    init(gracePeriod: Duration = .seconds(10), wipeAfterFailures: Int? = nil) throws {
        device = try SimulatedDevice.setUp(
            in: directory.path, passcode: SecureBytes(utf8: "1234"),
            configuration: .init(
                gracePeriod: gracePeriod, attemptPolicy: .init(wipeAfterFailures: wipeAfterFailures), kdf: .minimal),
            clock: clock, schedulesTimers: false)
    }

    /// A new device instance on the same directory: a reboot.
    func reboot() throws {
        device = try SimulatedDevice(bootingFrom: directory.path, clock: clock, schedulesTimers: false)
    }

    func unlock(_ passcode: String? = nil) throws {
        try device.unlock(passcode: SecureBytes(utf8: passcode ?? self.passcode))
    }

    func advance(_ duration: Duration) async {
        await clock.advance(by: duration)
        device.refresh()
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
    } catch let error as any CodedError {
        return error.codeName
    } catch {
        return "unexpected: \(error)"
    }
}
