import DiskModel
import Clocks
import Foundation
import SecureKeys
import Testing

@testable import ProtectedData

@Suite("Simulated device: passcodes")
struct PasscodeTests {
    @Test("wrong passcodes: no delay for four, then 1 min, 5 min, 15 min, 15 min, 1 h; an attempt during a delay is refused with the time left")
    func escalatingDelays() async throws {
        let fixture = try DeviceFixture()
        try fixture.reboot()
        for failure in 1...4 {
            #expect(errorCode { try fixture.unlock("0000") } == "wrong-passcode", "failure \(failure)")
            #expect(fixture.device.passcodeRetryDelay == nil)
        }
        let expected: [Duration] = [.seconds(60), .seconds(300), .seconds(900), .seconds(900), .seconds(3600), .seconds(3600)]
        for (offset, delay) in expected.enumerated() {
            #expect(errorCode { try fixture.unlock("0000") } == "wrong-passcode", "failure \(5 + offset)")
            #expect(fixture.device.failedPasscodeAttempts == 5 + offset)
            #expect(fixture.device.passcodeRetryDelay == delay)
            await fixture.advance(delay - .milliseconds(1))
            do {
                try fixture.unlock()
                Issue.record("an attempt during the delay was accepted")
            } catch let error as DeviceError {
                #expect(error.code == .passcodeDelay)
                #expect(error.retryAfter == .milliseconds(1))
            }
            #expect(fixture.device.failedPasscodeAttempts == 5 + offset, "a refused attempt is not counted")
            await fixture.advance(.milliseconds(1))
        }
        try fixture.unlock()
        #expect(fixture.device.failedPasscodeAttempts == 0)
        #expect(fixture.device.passcodeRetryDelay == nil)
    }

    @Test("the failure count survives a restart, and the delay starts again in full")
    func failureCountPersists() async throws {
        let fixture = try DeviceFixture()
        try fixture.reboot()
        for _ in 1...5 { _ = errorCode { try fixture.unlock("0000") } }
        await fixture.advance(.seconds(30))
        try fixture.reboot()
        #expect(fixture.device.failedPasscodeAttempts == 5)
        #expect(fixture.device.passcodeRetryDelay == .seconds(60))
        #expect(errorCode { try fixture.unlock() } == "passcode-delay")
        await fixture.advance(.seconds(60))
        try fixture.unlock()
        try fixture.reboot()
        #expect(fixture.device.failedPasscodeAttempts == 0)
    }

    @Test("with wipe-after 10, the 10th wrong passcode erases the device's keys; it stays wiped after a reboot")
    func wipeAfterTenFailures() async throws {
        let fixture = try DeviceFixture(wipeAfterFailures: 10)
        try fixture.reboot()
        for failure in 1...9 {
            #expect(errorCode { try fixture.unlock("0000") } == "wrong-passcode", "failure \(failure)")
            await fixture.advance(.seconds(3600))
        }
        #expect(errorCode { try fixture.unlock("0000") } == "device-wiped")
        #expect(fixture.device.lockState == .wiped)
        #expect(fixture.available.isEmpty)
        #expect(errorCode { try fixture.unlock() } == "device-wiped")
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.file("device/device.keybag")))
        try fixture.reboot()
        #expect(fixture.device.lockState == .wiped)
        #expect(errorCode { try fixture.unlock() } == "device-wiped")
    }

    @Test("changing the passcode: afterwards only the new one unlocks, and class keys are unchanged")
    func changePasscode() throws {
        let fixture = try DeviceFixture()
        let before = try fixture.device.classKey(.complete)!.withUnsafeBytes { Array($0) }
        #expect(errorCode { try fixture.device.changePasscode(from: try SecureBytes(utf8: "0000"), to: try SecureBytes(utf8: "5678")) } == "wrong-passcode")
        try fixture.device.changePasscode(from: try SecureBytes(utf8: "1234"), to: try SecureBytes(utf8: "5678"))
        try fixture.reboot()
        #expect(errorCode { try fixture.unlock("1234") } == "wrong-passcode")
        try fixture.unlock("5678")
        #expect(try fixture.device.classKey(.complete)!.withUnsafeBytes { Array($0) } == before)
    }

    @Test(
        "a crash at any step of the passcode change leaves the old or the new passcode working, never neither",
        arguments: SecureFile.WriteStep.allCases)
    func crashDuringPasscodeChange(step: SecureFile.WriteStep) throws {
        let fixture = try DeviceFixture()
        #expect(throws: SimulatedCrash(point: .atomicWrite(step))) {
            try FaultPoint.$plan.withValue(.init(.atomicWrite(step), pathSuffix: "device.keybag")) {
                try fixture.device.changePasscode(from: try SecureBytes(utf8: "1234"), to: try SecureBytes(utf8: "5678"))
            }
        }
        try fixture.reboot()
        let old = errorCode { try fixture.unlock("1234") }
        try fixture.reboot()
        let new = errorCode { try fixture.unlock("5678") }
        // Before the rename the old keybag is in place; from the rename on, the new one.
        let renamed = step == .renamed || step == .syncedDirectory
        #expect(old == (renamed ? "wrong-passcode" : nil))
        #expect(new == (renamed ? nil : "wrong-passcode"))
    }

    @Test("an attempt is counted before the passcode is checked: a crash, or a state file that cannot be written, never gives a free guess")
    func attemptIsCountedBeforeItIsChecked() throws {
        let fixture = try DeviceFixture(wipeAfterFailures: 3)
        try fixture.reboot()
        // A crash right after the count was written, before the answer: the attempt stays counted.
        #expect(throws: SimulatedCrash(point: .atomicWrite(.syncedDirectory))) {
            try FaultPoint.$plan.withValue(.init(.atomicWrite(.syncedDirectory), pathSuffix: "state.json")) { try fixture.unlock("0000") }
        }
        try fixture.reboot()
        #expect(fixture.device.failedPasscodeAttempts == 1)
        // A count that cannot be written refuses the attempt unchecked: not even the right passcode unlocks.
        #expect(throws: SimulatedCrash(point: .atomicWrite(.createdTemporary))) {
            try FaultPoint.$plan.withValue(.init(.atomicWrite(.createdTemporary), pathSuffix: "state.json")) { try fixture.unlock("1234") }
        }
        #expect(fixture.device.lockState != .unlocked)
        // Two more wrong ones, the last interrupted after its count: the boot finishes the erase.
        #expect(errorCode { try fixture.unlock("0000") } == "wrong-passcode")
        #expect(throws: SimulatedCrash(point: .atomicWrite(.syncedDirectory))) {
            try FaultPoint.$plan.withValue(.init(.atomicWrite(.syncedDirectory), pathSuffix: "state.json")) { try fixture.unlock("0000") }
        }
        try fixture.reboot()
        #expect(fixture.device.lockState == .wiped)
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.file("device/device.keybag")))
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.file("hardware/uid.key")))
    }

    @Test("tpm-lockout waits until the TPM's counter is below its limit: one recovery interval per failure over it, and says the TPM is the source")
    func tpmLockoutWait() {
        let atLimit = DeviceError.tpmLockout(counter: 3, maximum: 3, interval: .seconds(10))
        #expect(atLimit.code.name == "tpm-lockout")
        #expect(atLimit.retryAfter == .seconds(10))
        #expect(atLimit.message.contains("lockout counter is 3 of 3") && atLimit.message.contains("on the TPM's clock"), "\(atLimit.message)")
        #expect(DeviceError.tpmLockout(counter: 5, maximum: 3, interval: .seconds(10)).retryAfter == .seconds(30))
        let unknown = DeviceError.tpmLockout(counter: nil, maximum: nil, interval: nil)
        #expect(unknown.retryAfter == nil && unknown.message.contains("TPM"))
    }
}
