import Foundation
import SecureKeys
import TestSupport
import Testing

@testable import ProtectedData
@testable import TPMKeys

/// A device on a temporary directory (minimal Argon2id, a manual clock) whose key is kept by a store of
/// the test's choice, beside a software TPM of its own.
final class TPMFixture: @unchecked Sendable {  // one test's own object, used from that test only
    let directory = TemporaryDirectory()
    let clock = ManualClock()
    let tpm: SoftwareTPM
    var device: KeybagDevice?

    var files: DeviceKeyFiles { DeviceKeyFiles(stateDirectory: directory.path) }
    var tpmStore: TPMDeviceKeyStore { TPMDeviceKeyStore(tcti: tpm.tcti) }

    /// Sets up a device whose key `keyStore` keeps (the TPM store when `nil`).
    init(keyStore: (any DeviceKeyStore)? = nil, wipeAfterFailures: Int? = nil) throws {
        tpm = try SoftwareTPM()
        device = try KeybagDevice.setUp(
            in: directory.path, passcode: SecureBytes(utf8: "1234"),
            configuration: .init(attemptPolicy: .init(wipeAfterFailures: wipeAfterFailures), kdf: .minimal), clock: clock,
            keyStore: keyStore ?? TPMDeviceKeyStore(tcti: tpm.tcti))
    }

    /// Powers the device off and boots it again with `keyStore` (the TPM store when `nil`).
    func reboot(keyStore: (any DeviceKeyStore)? = nil) throws {
        device?.powerOff()
        device = nil
        device = try KeybagDevice(bootingFrom: directory.path, clock: clock, keyStore: keyStore ?? tpmStore)
    }

    /// Boots with the store the files call for (`--key-store auto`).
    func rebootWithTheStoreItUses() throws {
        let kind = try #require(files.storeKindForBoot)
        try reboot(keyStore: kind == .tpm ? tpmStore : FileDeviceKeyStore())
    }

    func powerOff() {
        device?.powerOff()
        device = nil
    }

    func unlock(_ passcode: String = "1234") throws {
        try #require(device).unlock(passcode: SecureBytes(utf8: passcode))
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    func bytes(_ path: String) throws -> [UInt8] { Array(try Data(contentsOf: URL(fileURLWithPath: path))) }
}

/// The code of a `DeviceError` or `SecureKeysError` thrown by `body`, `nil` when nothing is thrown.
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

/// The message of what `body` throws.
func errorMessage(_ body: () throws -> Void) -> String? {
    do {
        try body()
        return nil
    } catch {
        return "\(error)"
    }
}
