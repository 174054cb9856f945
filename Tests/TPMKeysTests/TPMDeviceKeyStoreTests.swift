import Foundation
import SecureKeys
import TestSupport
import Testing

@testable import ProtectedData
@testable import TPMKeys

/// The device key sealed by a software TPM: set up, boot after a reboot of the device and of the TPM, refusal on
/// another TPM, a damaged file, a store of the wrong kind, detection.
@Suite("TPM device key store", .enabled(if: SoftwareTPM.missing == nil, "\(SoftwareTPM.missing ?? "")"))
struct TPMDeviceKeyStoreTests {
    @Test("a device set up with the TPM store keeps only hardware/uid.tpm (0600, PSTK v1), and says it uses the TPM")
    func setUpWritesOnlyTheSealedFile() throws {
        let fixture = try TPMFixture()
        #expect(fixture.exists(fixture.files.sealedKeyPath))
        #expect(!fixture.exists(fixture.files.plainKeyPath))
        let attributes = try FileManager.default.attributesOfItem(atPath: fixture.files.sealedKeyPath)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let bytes = try fixture.bytes(fixture.files.sealedKeyPath)
        #expect(Array(bytes.prefix(6)) == Array("PSTK".utf8) + [1, 1])
        #expect(try SealedKeyFile(decoding: bytes, path: "uid.tpm").bytes == bytes)
        #expect(DeviceKeyStoreKind.of(directory: fixture.directory.path) == .tpm)
        #expect(fixture.files.storeKindForBoot == .tpm)
    }

    @Test("the sealed key unseals after a reboot of the device, and after the TPM itself restarts on its state")
    func unsealsAfterRebootAndTPMRestart() throws {
        let fixture = try TPMFixture()
        try fixture.reboot()
        #expect(errorCode { try fixture.unlock("0000") } == "wrong-passcode")
        try fixture.unlock()
        #expect(fixture.device?.lockState == .unlocked)

        fixture.powerOff()
        try fixture.tpm.powerCycle()
        try fixture.reboot()
        try fixture.unlock()
        #expect(fixture.device?.isProtectedDataAvailable(for: .complete) == true)
    }

    @Test("the sealed file moved to another TPM is refused as sealed by another TPM, and left as it is")
    func anotherTPMRefusesTheFile() throws {
        let fixture = try TPMFixture()
        fixture.powerOff()
        let before = try fixture.bytes(fixture.files.sealedKeyPath)
        let other = try SoftwareTPM()
        let store = TPMDeviceKeyStore(tcti: other.tcti)
        #expect(errorCode { _ = try KeybagDevice(bootingFrom: fixture.directory.path, clock: fixture.clock, keyStore: store) }
            == "sealed-by-another-tpm")
        #expect(errorMessage { _ = try store.load(from: fixture.files) }?.contains("sealed by another TPM") == true)
        #expect(try fixture.bytes(fixture.files.sealedKeyPath) == before)
        // The TPM that sealed it still unseals it.
        try fixture.reboot()
        try fixture.unlock()
    }

    @Test("a sealed file altered under a valid checksum is refused by its own TPM as damaged, not as another TPM's")
    func alteredPrivateAreaIsDamaged() throws {
        let fixture = try TPMFixture()
        fixture.powerOff()
        let path = fixture.files.sealedKeyPath
        var file = try SealedKeyFile(decoding: try fixture.bytes(path), path: path)
        // The last byte of the encrypted private area: the TPM's integrity check fails on it.
        file.sealed.privateArea[file.sealed.privateArea.count - 1] ^= 0x01
        try Data(file.bytes).write(to: URL(fileURLWithPath: path))
        let error = errorMessage { _ = try fixture.tpmStore.load(from: fixture.files) }
        #expect(error?.contains("key-file-damaged") == true, "\(error ?? "nothing thrown")")
        #expect(error?.contains("another TPM") == false)

        // A byte flipped without fixing the checksum: damaged before the TPM is asked.
        var bytes = try fixture.bytes(path)
        bytes[20] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(errorMessage { _ = try fixture.tpmStore.load(from: fixture.files) }?.contains("checksum") == true)
    }

    @Test("a device is booted only with the kind of store that keeps its key: key-store-mismatch otherwise")
    func wrongKindOfStoreIsRefused() throws {
        let sealed = try TPMFixture()
        sealed.powerOff()
        #expect(errorCode { try sealed.reboot(keyStore: FileDeviceKeyStore()) } == "key-store-mismatch")
        #expect(errorMessage { try sealed.reboot(keyStore: FileDeviceKeyStore()) }?.contains("hardware/uid.tpm") == true)

        let plain = try TPMFixture(keyStore: FileDeviceKeyStore())
        plain.powerOff()
        #expect(errorCode { try plain.reboot() } == "key-store-mismatch")
        #expect(errorMessage { try plain.reboot() }?.contains("migrate-key") == true)
        try plain.reboot(keyStore: FileDeviceKeyStore())
        #expect(DeviceKeyStoreKind.of(directory: plain.directory.path) == .file)
    }

    @Test("detection: a software TPM is present (manufacturer IBM); a missing device node or a closed port is absent, with the reason")
    func detection() throws {
        let tpm = try SoftwareTPM()
        let present = TPMPresence.detect(tcti: tpm.tcti)
        #expect(present.isPresent)
        #expect(present == .present(tcti: tpm.tcti, manufacturer: "IBM"), "\(present)")

        let noNode = TPMPresence.detect(tcti: "device:/nonexistent/tpmrm0")
        #expect(!noNode.isPresent)
        #expect(noNode.description.contains("/nonexistent/tpmrm0 does not exist"), "\(noNode)")

        let port = tpm.port
        tpm.stop()
        let closed = TPMPresence.detect(tcti: "swtpm:host=127.0.0.1,port=\(port)")
        #expect(!closed.isPresent)
        let directory = TemporaryDirectory()
        #expect(errorCode {
            _ = try KeybagDevice.setUp(
                in: directory.path, passcode: SecureBytes(utf8: "1234"), configuration: .init(kdf: .minimal),
                keyStore: TPMDeviceKeyStore(tcti: "swtpm:host=127.0.0.1,port=\(port)"))
        } == "tpm-unavailable")
    }

    @Test("an unsealed key leaves no copy in this process, not even half of one, once its SecureBytes is wiped")
    func unsealedKeyLeavesNoCopy() throws {
        let tpm = try SoftwareTPM()
        let directory = TemporaryDirectory()
        let files = DeviceKeyFiles(stateDirectory: directory.path)
        try SecureFile.createDirectory(at: files.folder, in: .real)
        let store = TPMDeviceKeyStore(tcti: tpm.tcti)
        let key = try SecureBytes.random(count: 32)
        // Sealed on a thread of its own, as an agent seals a key on a client's thread, and searched before the
        // unseal: in one thread, the unseal's TPM context (tpm2-tss callocs one of the same size) would take
        // the memory the sealing context freed and zero a copy left there before it is searched.
        let sealed = DispatchSemaphore(value: 0)
        Thread {
            try? store.keep(key, in: files)
            sealed.signal()
        }.start()
        sealed.wait()
        #expect(FileManager.default.fileExists(atPath: files.sealedKeyPath))
        let afterSealing = try key.withUnsafeBytes { bytes in
            let start = UInt(bitPattern: bytes.baseAddress)
            return try ProcessMemory.occurrences(of: bytes, excluding: [start..<start + UInt(bytes.count)])
        }
        #expect(afterSealing.isEmpty, "copies of the device key left by sealing at \(afterSealing.map { String($0, radix: 16) })")
        let unsealed = try store.load(from: files)
        #expect(unsealed.constantTimeEquals(key))
        unsealed.wipe()
        // Each half on its own too: a freed buffer keeps the key's tail once the allocator has written its own
        // pointers over the head.
        let found = try key.withUnsafeBytes { bytes in
            let start = UInt(bitPattern: bytes.baseAddress)
            let reference = [start..<start + UInt(bytes.count)]
            return try [bytes[...], bytes[..<16], bytes[16...]].flatMap { part in
                try ProcessMemory.occurrences(of: UnsafeRawBufferPointer(rebasing: part), excluding: reference)
            }
        }
        #expect(found.isEmpty, "copies of the device key left at \(found.map { String($0, radix: 16) })")
    }
}
