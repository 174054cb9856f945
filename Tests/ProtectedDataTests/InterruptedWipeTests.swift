import DiskModel
import TestSupport
import Foundation
import SecureKeys
import Testing

@testable import ProtectedData

/// An erase that stops half-way — a failed unlink, a crash after it recorded itself — is finished at the
/// next attempt or boot, and nothing says "erased" before the keys are gone.
@Suite("Simulated device: an interrupted wipe is finished, never reported done before it is")
struct InterruptedWipeTests {
    /// A device with wipe-after 3, rebooted, with two wrong passcodes counted: the next wrong one erases it.
    private func deviceOneTypoFromWipe() throws -> DeviceFixture {
        let fixture = try DeviceFixture(wipeAfterFailures: 3)
        try fixture.reboot()
        for _ in 0..<2 { #expect(errorCode { try fixture.unlock("0000") } == "wrong-passcode") }
        return fixture
    }

    private func keyFiles(_ fixture: DeviceFixture) -> [String] {
        [fixture.directory.file("device/device.keybag"), fixture.directory.file("hardware/uid.key")]
    }

    private func keyFilesLeft(_ fixture: DeviceFixture) -> [String] {
        keyFiles(fixture).filter { FileManager.default.fileExists(atPath: $0) }
    }

    private func stateSaysWiped(_ fixture: DeviceFixture) throws -> Bool {
        try DeviceStateFile.load(from: fixture.directory.file("device/state.json")).state.wiped
    }

    /// The third wrong passcode, with `fault` injected into the erase it starts.
    private func typo(_ fixture: DeviceFixture, fault: FaultPoint.Plan) -> DeviceError? {
        FaultPoint.$plan.withValue(fault) {
            do {
                try fixture.unlock("0000")
                return nil
            } catch let error as DeviceError {
                return error
            } catch {
                Issue.record("unexpected \(error)")
                return nil
            }
        }
    }

    @Test(
        "an unlink that fails during the wipe is reported as wipe-incomplete (never device-wiped), and the next attempt finishes the erase",
        arguments: [
            FaultPoint.Plan(.wipeRemovingKeyFile, .fail(.ioError), pathSuffix: "/device.keybag"),
            FaultPoint.Plan(.wipeRemovingKeyFile, .fail(.ioError), pathSuffix: "/uid.key"),
        ])
    func failedUnlinkIsFinishedAtTheNextAttempt(fault: FaultPoint.Plan) throws {
        let fixture = try deviceOneTypoFromWipe()
        let error = try #require(typo(fixture, fault: fault))
        #expect(error.code == .wipeIncomplete)
        #expect(error.message.contains("NOT erased"), "\(error.message)")
        #expect(!keyFilesLeft(fixture).isEmpty, "the fault removed nothing, yet no key file is left")
        #expect(fixture.device.isErasePending)
        #expect(fixture.available.isEmpty, "a key is still held in memory")
        #expect(try stateSaysWiped(fixture))
        // The next attempt, even with the right passcode, finishes the erase and is refused.
        #expect(errorCode { try fixture.unlock() } == "device-wiped")
        #expect(keyFilesLeft(fixture).isEmpty, "the erase was not finished: \(keyFilesLeft(fixture))")
        #expect(!fixture.device.isErasePending)
    }

    @Test("an unlink that fails during the wipe is finished by the next boot, before anything reads the key files")
    func failedUnlinkIsFinishedAtBoot() throws {
        let fixture = try deviceOneTypoFromWipe()
        #expect(typo(fixture, fault: .init(.wipeRemovingKeyFile, .fail(.ioError), pathSuffix: "/uid.key"))?.code == .wipeIncomplete)
        #expect(FileManager.default.fileExists(atPath: fixture.directory.file("hardware/uid.key")))
        try fixture.reboot()
        #expect(keyFilesLeft(fixture).isEmpty, "boot left \(keyFilesLeft(fixture))")
        #expect(fixture.device.lockState == .wiped)
        #expect(errorCode { try fixture.unlock() } == "device-wiped")
    }

    @Test("a crash right after the wipe recorded itself leaves the keys on disk; the next boot removes them (rolls forward)")
    func crashAfterRecordingIsRolledForward() throws {
        let fixture = try deviceOneTypoFromWipe()
        #expect(throws: SimulatedCrash(point: .wipeRecorded)) {
            try FaultPoint.$plan.withValue(.init(.wipeRecorded)) { try fixture.unlock("0000") }
        }
        #expect(try stateSaysWiped(fixture))
        #expect(keyFilesLeft(fixture).count == 2)
        try fixture.reboot()
        #expect(keyFilesLeft(fixture).isEmpty, "boot left \(keyFilesLeft(fixture))")
        #expect(fixture.device.lockState == .wiped)
    }

    @Test("the planted wipe-not-rolled-forward leaves the keys of an interrupted wipe on disk after boot (what the roll-forward prevents)")
    func plantedFaultKeepsTheKeys() throws {
        let fixture = try deviceOneTypoFromWipe()
        #expect(throws: SimulatedCrash(point: .wipeRecorded)) {
            try FaultPoint.$plan.withValue(.init(.wipeRecorded)) { try fixture.unlock("0000") }
        }
        fixture.device.powerOff()
        fixture.device = try KeybagDevice(
            bootingFrom: fixture.directory.path, clock: fixture.clock, plantedFault: .wipeNotRolledForward, fileSystem: .real)
        #expect(keyFilesLeft(fixture).count == 2)
        #expect(fixture.device.lockState == .wiped && !fixture.device.isErasePending)
    }

    @Test("a wipe that cannot record itself removes nothing, says wipe-incomplete, holds no key, and the next attempt records it and erases")
    func failedRecordingIsRetried() throws {
        let fixture = try deviceOneTypoFromWipe()
        #expect(typo(fixture, fault: .init(.wipeRecording, .fail(.ioError)))?.code == .wipeIncomplete)
        #expect(try !stateSaysWiped(fixture), "the state says wiped although its write failed")
        #expect(keyFilesLeft(fixture).count == 2, "keys removed before the erase was recorded")
        #expect(fixture.available.isEmpty)
        #expect(errorCode { try fixture.unlock() } == "device-wiped")
        #expect(try stateSaysWiped(fixture))
        #expect(keyFilesLeft(fixture).isEmpty)
    }

    @Test("a wiped state names no device key and carries no tag; making it say not wiped brings no key back")
    func wipedStateCannotBeUndone() throws {
        let fixture = try deviceOneTypoFromWipe()
        #expect(errorCode { try fixture.unlock("0000") } == "device-wiped")
        fixture.device.powerOff()
        let path = fixture.directory.file("device/state.json")
        var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        #expect(object["tag"] == nil || object["tag"] is NSNull)
        object["wiped"] = false
        object["failedPasscodeAttempts"] = 0
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
        #expect(throws: (any Error).self) {
            fixture.device = try KeybagDevice(bootingFrom: fixture.directory.path, clock: fixture.clock)
        }
        #expect(keyFilesLeft(fixture).isEmpty)
    }
}
