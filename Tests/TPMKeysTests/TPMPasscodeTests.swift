import DiskModel
import Foundation
import TestSupport
import Testing

@testable import ProtectedData
@testable import SecureKeys
@testable import TPMKeys

/// The passcode the TPM checks (keybag version 2): the class keys need a secret that a software TPM releases
/// only for an authValue derived from the passcode, from a dictionary-attack-protected object.
@Suite("The passcode the TPM checks", .enabled(if: SoftwareTPM.missing == nil, "\(SoftwareTPM.missing ?? "")"))
struct TPMPasscodeTests {
    /// Runs a stock tpm2-tools command on `tpm` (in `directory`); its exit status and standard error.
    static func tpm2(_ tool: String, _ arguments: [String], tpm: SoftwareTPM, in directory: String) throws -> (status: Int32, error: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/" + tool)
        process.arguments = arguments
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        var environment = ProcessInfo.processInfo.environment
        environment["TPM2TOOLS_TCTI"] = tpm.tcti
        environment["TSS2_LOG"] = "all+NONE"
        process.environment = environment
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        // swtpm has no resource manager: what a tool leaves loaded (its saved contexts' objects, its sessions)
        // would fill the TPM's three object slots.
        if tool != "tpm2_flushcontext" {
            for kind in ["-t", "-l", "-s"] { _ = try tpm2("tpm2_flushcontext", [kind], tpm: tpm, in: directory) }
        }
        return (process.terminationStatus, text)
    }

    /// The TPM's dictionary-attack state, read through ESYS.
    static func lockout(_ tpm: SoftwareTPM) throws -> TPMConnection.DictionaryAttackState {
        try TPMConnection(tcti: tpm.tcti).dictionaryAttackState()
    }

    /// `tpm2_dictionarylockout --setup-parameters`: the lockout authorization of a software TPM is empty.
    static func setLimits(_ tpm: SoftwareTPM, maxTries: Int, recoverySeconds: Int, in directory: String) throws {
        let result = try tpm2(
            "tpm2_dictionarylockout",
            ["--setup-parameters", "--max-tries=\(maxTries)", "--recovery-time=\(recoverySeconds)", "--lockout-recovery-time=\(recoverySeconds)"],
            tpm: tpm, in: directory)
        try #require(result.status == 0, "\(result.error)")
    }

    @Test("a new TPM device's keybag is version 2; stock tpm2_unseal cannot unseal its passcode secret without the passcode, and can with the authValue the passcode gives")
    func stockToolsCannotUnsealWithoutThePasscode() throws {
        let fixture = try TPMFixture()
        #expect(fixture.device?.keybagVersion == 2)
        let layout = DeviceLayout(root: fixture.directory.path, fileSystem: .real)
        let deviceKey = try fixture.tpmStore.load(from: fixture.files)
        defer { deviceKey.wipe() }
        let keybag = try Keybag.load(from: layout.keybagPath, deviceKey: deviceKey)
        #expect(keybag.version == 2)
        let record = try SealedKeyFile(decoding: try #require(keybag.sealedPasscodeSecret), path: "record")
        #expect(record.sealed.publicArea.count > 0)

        let work = TemporaryDirectory()
        try Data(record.sealed.publicArea).write(to: URL(fileURLWithPath: work.path + "/secret.pub"))
        try Data(record.sealed.privateArea).write(to: URL(fileURLWithPath: work.path + "/secret.priv"))
        // The primary storage key of keys/README.md's template (the SRK template, with noda).
        let primary = try Self.tpm2(
            "tpm2_createprimary",
            ["-C", "o", "-G", "ecc", "-a", "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|restricted|decrypt|noda", "-c", "primary.ctx"],
            tpm: fixture.tpm, in: work.path)
        try #require(primary.status == 0, "\(primary.error)")
        let load = try Self.tpm2(
            "tpm2_load", ["-C", "primary.ctx", "-u", "secret.pub", "-r", "secret.priv", "-c", "secret.ctx"], tpm: fixture.tpm, in: work.path)
        try #require(load.status == 0, "\(load.error)")

        // Any process of the user can load the object, but not unseal it: an empty authValue is refused, and counted.
        let withoutPasscode = try Self.tpm2("tpm2_unseal", ["-c", "secret.ctx", "-o", "secret.out"], tpm: fixture.tpm, in: work.path)
        #expect(withoutPasscode.status != 0)
        #expect(withoutPasscode.error.contains("authorization") || withoutPasscode.error.contains("0x98e") || withoutPasscode.error.contains("auth"),
            "\(withoutPasscode.error)")
        #expect(try Self.lockout(fixture.tpm).counter == 1, "the failed unseal raised the TPM's lockout counter")
        #expect(!FileManager.default.fileExists(atPath: work.path + "/secret.out"))

        // With the authValue derived from the right passcode, the same stock tool unseals 32 bytes: the object
        // is exactly what keys/README.md describes.
        let passcodeKey = try keybag.kdf.deriveKey(from: try SecureBytes(utf8: "1234"), salt: keybag.salt)
        let authValue = try Keybag.passcodeAuthValue(passcodeKey: passcodeKey)
        let withPasscode = try Self.tpm2(
            "tpm2_unseal", ["-c", "secret.ctx", "-p", "hex:" + (try authValue.withUnsafeBytes { Array($0) }).hex, "-o", "secret.out"],
            tpm: fixture.tpm, in: work.path)
        #expect(withPasscode.status == 0, "\(withPasscode.error)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: work.path + "/secret.out")).count == 32)
    }

    @Test("three wrong passcodes are three TPM authorization failures: TPM2_PT_LOCKOUT_COUNTER is 3, and the right passcode then unlocks")
    func wrongPasscodesRaiseTheTPMLockoutCounter() throws {
        let fixture = try TPMFixture()
        let work = TemporaryDirectory()
        try Self.setLimits(fixture.tpm, maxTries: 10, recoverySeconds: 1000, in: work.path)
        try fixture.reboot()
        #expect(try Self.lockout(fixture.tpm).counter == 0)
        for attempt in 1...3 {
            #expect(errorCode { try fixture.unlock("000\(attempt)") } == "wrong-passcode")
            #expect(try Self.lockout(fixture.tpm).counter == UInt32(attempt))
        }
        #expect(fixture.device?.failedPasscodeAttempts == 3, "the device's own count stays on top of the TPM's")
        try fixture.unlock()
        #expect(fixture.device?.isProtectedDataAvailable(for: .complete) == true)
        #expect(fixture.device?.failedPasscodeAttempts == 0)
        #expect(try Self.lockout(fixture.tpm).counter == 3, "a right passcode does not reset the TPM's counter")
    }

    @Test("in lockout the device says tpm-lockout, naming the TPM as the source, and does not count the attempt; after recovery the right passcode unlocks")
    func lockoutIsReportedAndRecovers() throws {
        let fixture = try TPMFixture()
        let work = TemporaryDirectory()
        try Self.setLimits(fixture.tpm, maxTries: 3, recoverySeconds: 1000, in: work.path)
        try fixture.reboot()
        for attempt in 1...3 {
            #expect(errorCode { try fixture.unlock("000\(attempt)") } == "wrong-passcode")
        }
        #expect(try Self.lockout(fixture.tpm).counter == 3)
        var thrown: DeviceError?
        do { try fixture.unlock() } catch let error as DeviceError { thrown = error }
        let error = try #require(thrown, "the right passcode was accepted in lockout")
        #expect(error.code == .tpmLockout)
        #expect(error.message.contains("TPM") && error.message.contains("lockout counter is 3 of 3"), "\(error.message)")
        #expect(error.retryAfter == .seconds(1000), "the TPM's recovery interval")
        #expect(fixture.device?.failedPasscodeAttempts == 3, "an attempt the TPM did not check is not counted")
        #expect(fixture.device?.lockState == .beforeFirstUnlock)
        // The device key is outside dictionary-attack counting: a reboot in lockout boots, with the count on disk.
        try fixture.reboot()
        #expect(fixture.device?.failedPasscodeAttempts == 3)
        #expect(errorCode { try fixture.unlock() } == "tpm-lockout")

        // Recovery: the lockout authorization is empty here, so the owner resets the counter.
        let reset = try Self.tpm2("tpm2_dictionarylockout", ["--clear-lockout"], tpm: fixture.tpm, in: work.path)
        try #require(reset.status == 0, "\(reset.error)")
        try fixture.unlock()
        #expect(fixture.device?.lockState == .unlocked)
    }

    @Test("with the TPM gone after boot, an unlock says tpm-unavailable and is not counted: tries past the erase limit erase nothing")
    func unreachableTPMIsNotCounted() throws {
        let fixture = try TPMFixture(wipeAfterFailures: 2)
        try fixture.reboot()
        fixture.tpm.stop()
        for _ in 1...3 {
            #expect(errorCode { try fixture.unlock() } == "tpm-unavailable")
        }
        #expect(fixture.device?.failedPasscodeAttempts == 0)
        #expect(fixture.device?.lockState == .beforeFirstUnlock)
        try fixture.tpm.start()
        try fixture.reboot()
        #expect(fixture.device?.failedPasscodeAttempts == 0)
        try fixture.unlock()
        #expect(fixture.device?.lockState == .unlocked)
    }

    @Test("a passcode change on a version-2 keybag: after a reboot the new passcode unlocks, the old one is a TPM-refused wrong passcode")
    func passcodeChangeReseals() throws {
        let fixture = try TPMFixture()
        let before = try fixture.bytes(DeviceLayout(root: fixture.directory.path, fileSystem: .real).keybagPath)
        try #require(fixture.device).changePasscode(from: SecureBytes(utf8: "1234"), to: SecureBytes(utf8: "5678"))
        let after = try fixture.bytes(DeviceLayout(root: fixture.directory.path, fileSystem: .real).keybagPath)
        #expect(after[4] == 2)
        #expect(before != after)
        try fixture.reboot()
        #expect(fixture.device?.keybagVersion == 2)
        let counter = try Self.lockout(fixture.tpm).counter
        #expect(errorCode { try fixture.unlock("1234") } == "wrong-passcode")
        #expect(try Self.lockout(fixture.tpm).counter == counter + 1)
        try fixture.unlock("5678")
        #expect(fixture.device?.lockState == .unlocked)
    }

    /// A TPM device with a version-1 keybag, powered off: a file device whose key was moved into the TPM.
    private func versionOneTPMDevice() throws -> TPMFixture {
        let fixture = try TPMFixture(keyStore: FileDeviceKeyStore())
        fixture.powerOff()
        #expect(try DeviceKeyMigration.migrate(stateDirectory: fixture.directory.path, to: fixture.tpmStore) == .migrated)
        try fixture.reboot()
        #expect(fixture.device?.keybagVersion == 1)
        return fixture
    }

    @Test("a TPM device's version-1 keybag moves to version 2 with the right passcode only; the TPM then checks the passcode")
    func keybagMovesToVersion2() throws {
        let fixture = try versionOneTPMDevice()
        let path = DeviceLayout(root: fixture.directory.path, fileSystem: .real).keybagPath
        let before = try fixture.bytes(path)
        let device = try #require(fixture.device)
        #expect(errorCode { try device.sealPasscodeSecret(passcode: SecureBytes(utf8: "0000")) } == "wrong-passcode")
        #expect(try fixture.bytes(path) == before, "a wrong passcode writes nothing")
        #expect(try device.sealPasscodeSecret(passcode: SecureBytes(utf8: "1234")))
        #expect(device.keybagVersion == 2)
        #expect(try !device.sealPasscodeSecret(passcode: SecureBytes(utf8: "1234")), "version 2 already")

        try fixture.reboot()
        #expect(fixture.device?.keybagVersion == 2)
        let counter = try Self.lockout(fixture.tpm).counter
        #expect(errorCode { try fixture.unlock("0000") } == "wrong-passcode")
        #expect(try Self.lockout(fixture.tpm).counter == counter + 1, "the TPM counted the wrong passcode")
        try fixture.unlock()
        #expect(fixture.device?.isProtectedDataAvailable(for: .complete) == true)
    }

    /// Where a keybag move is stopped.
    enum MoveStop: Sendable, CustomTestStringConvertible {
        case write(SecureFile.WriteStep)
        case beforeWriting

        static var all: [MoveStop] { [.beforeWriting] + SecureFile.WriteStep.allCases.map { .write($0) } }
        var testDescription: String {
            switch self {
            case .write(let step): "write stopped at \(step.rawValue)"
            case .beforeWriting: "crash before the write"
            }
        }
    }

    @Test("a keybag move stopped at any step leaves a keybag the passcode unlocks, version 1 or 2, and the next move finishes", arguments: MoveStop.all)
    func stoppedMoveKeepsTheKeybag(stop: MoveStop) throws {
        let fixture = try versionOneTPMDevice()
        let device = try #require(fixture.device)
        let move = { try device.sealPasscodeSecret(passcode: SecureBytes(utf8: "1234")) }
        var thrown: (any Error)?
        do {
            switch stop {
            case .write(let step):
                _ = try FaultPoint.$plan.withValue(.init(.atomicWrite(step), pathSuffix: "/device.keybag")) { try move() }
            case .beforeWriting:
                _ = try FaultPoint.$plan.withValue(.init(.keybagMoveSealed)) { try move() }
            }
        } catch {
            thrown = error
        }
        #expect(thrown != nil, "the stop at \(stop.testDescription) was never reached")
        let version = try fixture.bytes(DeviceLayout(root: fixture.directory.path, fileSystem: .real).keybagPath)[4]
        switch stop {
        case .write(.renamed), .write(.syncedDirectory): #expect(version == 2, "the rename is the commit point")
        default: #expect(version == 1, "before the rename the old keybag is the device's")
        }
        try fixture.reboot()
        try fixture.unlock()
        try #require(fixture.device).sealPasscodeSecret(passcode: SecureBytes(utf8: "1234"))
        try fixture.reboot()
        #expect(fixture.device?.keybagVersion == 2)
        try fixture.unlock()
    }

    @Test("a passcode change on version 2 stopped at any step of its write leaves the old passcode working before the rename, the new one from it", arguments: SecureFile.WriteStep.allCases)
    func stoppedPasscodeChange(step: SecureFile.WriteStep) throws {
        let fixture = try TPMFixture()
        let device = try #require(fixture.device)
        #expect(throws: SimulatedCrash(point: .atomicWrite(step))) {
            try FaultPoint.$plan.withValue(.init(.atomicWrite(step), pathSuffix: "/device.keybag")) {
                try device.changePasscode(from: SecureBytes(utf8: "1234"), to: SecureBytes(utf8: "5678"))
            }
        }
        try fixture.reboot()
        #expect(fixture.device?.keybagVersion == 2)
        let renamed = step == .renamed || step == .syncedDirectory
        #expect(errorCode { try fixture.unlock(renamed ? "1234" : "5678") } == "wrong-passcode")
        try fixture.unlock(renamed ? "5678" : "1234")
        #expect(fixture.device?.isProtectedDataAvailable(for: .complete) == true)
    }

    @Test("a device with the file store keeps a version-1 keybag, and cannot move it to version 2")
    func fileDeviceKeepsVersion1() throws {
        let fixture = try TPMFixture(keyStore: FileDeviceKeyStore())
        #expect(fixture.device?.keybagVersion == 1)
        #expect(errorCode { try fixture.device?.sealPasscodeSecret(passcode: SecureBytes(utf8: "1234")) } == "invalid-device-setting")
    }
}
