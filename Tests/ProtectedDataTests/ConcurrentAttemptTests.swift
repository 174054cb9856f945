import TestSupport
import Foundation
import SecureKeys
import Testing

@testable import ProtectedData
import StoreConcurrency

/// Passcode attempts on one device take turns: each is checked against the count the previous one left.
@Suite("Simulated device: concurrent passcode attempts take turns")
struct ConcurrentAttemptTests {
    /// Six wrong passcodes tried at once from six threads; the error code each got.
    private func sixAtOnce(_ device: KeybagDevice) -> [String] {
        let codes = LockedState<[String]>([])
        let start = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        for _ in 0..<6 {
            done.enter()
            Thread {
                start.wait()
                let code = errorCode { try device.unlock(passcode: try SecureBytes(utf8: "0000")) } ?? "none"
                codes.withLock { $0.append(code) }
                done.leave()
            }.start()
        }
        for _ in 0..<6 { start.signal() }
        done.wait()
        return codes.withLock { $0 }
    }

    /// A device at `failures` wrong passcodes, with the default Argon2id cost: an attempt takes long enough
    /// (tens of milliseconds) that six started together overlap.
    private func device(at failures: Int, wipeAfter: Int?) throws -> (TemporaryDirectory, ManualClock, KeybagDevice) {
        let directory = TemporaryDirectory()
        let clock = ManualClock()
        let device = try KeybagDevice.setUp(
            in: directory.path, passcode: try SecureBytes(utf8: "1234"),
            configuration: .init(attemptPolicy: .init(wipeAfterFailures: wipeAfter), kdf: .default), clock: clock)
        device.lock()
        clock.advance(by: .seconds(60))
        for _ in 0..<failures {
            _ = errorCode { try device.unlock(passcode: try SecureBytes(utf8: "0000")) }
            clock.advance(by: .seconds(3600))
        }
        #expect(device.failedPasscodeAttempts == failures)
        return (directory, clock, device)
    }

    @Test("six concurrent wrong unlocks at counter 4: one is evaluated (counter 5, a delay starts), five are refused with passcode-delay")
    func sixConcurrentUnlocksAtFour() throws {
        let (directory, _, device) = try device(at: 4, wipeAfter: nil)
        defer { withExtendedLifetime(directory) {} }
        let codes = sixAtOnce(device)
        #expect(device.failedPasscodeAttempts == 5, "codes: \(codes)")
        #expect(codes.filter { $0 == "wrong-passcode" }.count == 1, "codes: \(codes)")
        #expect(codes.filter { $0 == "passcode-delay" }.count == 5, "codes: \(codes)")
    }

    @Test("with wipe-after 10 at counter 9, six concurrent wrong unlocks erase once and the counter stops at 10")
    func concurrentUnlocksNeverPassWipeAfter() throws {
        let (directory, _, device) = try device(at: 9, wipeAfter: 10)
        defer { withExtendedLifetime(directory) {} }
        let codes = sixAtOnce(device)
        #expect(device.failedPasscodeAttempts == 10, "codes: \(codes)")
        #expect(codes.allSatisfy { $0 == "device-wiped" }, "codes: \(codes)")
        #expect(device.lockState == .wiped)
    }
}
