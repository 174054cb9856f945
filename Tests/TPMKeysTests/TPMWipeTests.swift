import DiskModel
import Foundation
import SecureKeys
import TestSupport
import Testing

@testable import ProtectedData
@testable import TPMKeys

/// The erase of a device whose key the TPM keeps removes the sealed file, durably, and finishes at boot —
/// with no TPM needed to erase.
@Suite("TPM device key: the erase removes the sealed file", .enabled(if: SoftwareTPM.missing == nil, "\(SoftwareTPM.missing ?? "")"))
struct TPMWipeTests {
    @Test("too many wrong passcodes erase the keybag and hardware/uid.tpm")
    func wipeRemovesTheSealedFile() throws {
        let fixture = try TPMFixture(wipeAfterFailures: 2)
        try fixture.reboot()
        #expect(errorCode { try fixture.unlock("0000") } == "wrong-passcode")
        #expect(errorCode { try fixture.unlock("0000") } == "device-wiped")
        #expect(!fixture.exists(fixture.files.sealedKeyPath))
        #expect(!fixture.exists(fixture.directory.file("device/device.keybag")))
        #expect(DeviceKeyStoreKind.of(directory: fixture.directory.path) == nil)
    }

    @Test("an erase whose unlink of uid.tpm failed is finished at the next boot, even with the file store and no TPM running")
    func interruptedWipeIsRolledForward() throws {
        let fixture = try TPMFixture(wipeAfterFailures: 1)
        try fixture.reboot()
        #expect(FaultPoint.$plan.withValue(.init(.wipeRemovingKeyFile, .fail(.ioError), pathSuffix: "/uid.tpm")) { errorCode { try fixture.unlock("0000") } }
            == "wipe-incomplete")
        #expect(fixture.exists(fixture.files.sealedKeyPath))
        #expect(!fixture.exists(fixture.directory.file("device/device.keybag")))
        fixture.powerOff()
        fixture.tpm.stop()
        try fixture.reboot(keyStore: FileDeviceKeyStore())
        #expect(fixture.device?.lockState == .wiped)
        #expect(!fixture.exists(fixture.files.sealedKeyPath))
    }
}
