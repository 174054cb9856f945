import DiskModel
import Foundation
import SecureKeys
import TestSupport
import Testing

@testable import ProtectedData
@testable import TPMKeys

/// A file key moved into the TPM, stopped at every step: the key is never lost, and never still on disk
/// unsealed while anything calls the device migrated.
@Suite("Device key migration from a file to the TPM", .enabled(if: SoftwareTPM.missing == nil, "\(SoftwareTPM.missing ?? "")"))
struct DeviceKeyMigrationTests {
    /// Where a migration is stopped.
    enum Stop: Sendable, CustomTestStringConvertible {
        case write(SecureFile.WriteStep)
        case migration(FaultPoint.Plan)

        var testDescription: String {
            switch self {
            case .write(let step): "crash writing uid.tpm at \(step.rawValue)"
            case .migration(let fault): "\(fault)"
            }
        }

        static let all: [Stop] = SecureFile.WriteStep.allCases.map(Stop.write) + [
            .migration(.init(.migrationSealed)), .migration(.init(.migrationVerified)),
            .migration(.init(.migrationRemovingPlainKey, .fail(.ioError))), .migration(.init(.migrationRemovedPlainKey)),
        ]
    }

    /// A device whose key is in its file, powered off.
    private func fileDevice() throws -> TPMFixture {
        let fixture = try TPMFixture(keyStore: FileDeviceKeyStore())
        fixture.powerOff()
        return fixture
    }

    @Test("a migration seals the same key, removes uid.key, and the device unlocks with the TPM store after it")
    func migrates() throws {
        let fixture = try fileDevice()
        let plainKey = try FileDeviceKeyStore().load(from: fixture.files)
        defer { plainKey.wipe() }
        #expect(try DeviceKeyMigration.migrate(stateDirectory: fixture.directory.path, to: fixture.tpmStore) == .migrated)
        #expect(!fixture.exists(fixture.files.plainKeyPath))
        #expect(DeviceKeyStoreKind.of(directory: fixture.directory.path) == .tpm)
        let sealedKey = try fixture.tpmStore.load(from: fixture.files)
        defer { sealedKey.wipe() }
        #expect(sealedKey.constantTimeEquals(plainKey))
        try fixture.reboot()
        try fixture.unlock()
        fixture.powerOff()
        #expect(try DeviceKeyMigration.migrate(stateDirectory: fixture.directory.path, to: fixture.tpmStore) == .alreadyMigrated)
    }

    @Test("a migration stopped at any step keeps the key: the device boots and unlocks, and the next migration finishes", arguments: Stop.all)
    func stoppedMigrationKeepsTheKey(stop: Stop) throws {
        let fixture = try fileDevice()
        let plainKey = try FileDeviceKeyStore().load(from: fixture.files)
        defer { plainKey.wipe() }
        let migrate = { try DeviceKeyMigration.migrate(stateDirectory: fixture.directory.path, to: fixture.tpmStore) }
        let thrown: (any Error)?
        do {
            switch stop {
            case .write(let step):
                _ = try FaultPoint.$plan.withValue(.init(.atomicWrite(step), pathSuffix: "/uid.tpm")) { try migrate() }
            case .migration(let fault):
                _ = try FaultPoint.$plan.withValue(fault) { try migrate() }
            }
            thrown = nil
        } catch {
            thrown = error
        }
        #expect(thrown != nil, "the stop at \(stop.testDescription) was never reached")

        // Never both unsealed on disk and called migrated.
        if fixture.exists(fixture.files.plainKeyPath) {
            #expect(DeviceKeyStoreKind.of(directory: fixture.directory.path) == .file)
        } else {
            #expect(fixture.exists(fixture.files.sealedKeyPath), "neither key file is left")
        }
        // The key is not lost: the device boots with the store its files call for, and the passcode unlocks it.
        try fixture.rebootWithTheStoreItUses()
        try fixture.unlock()
        fixture.powerOff()

        let outcome = try migrate()
        #expect([.migrated, .finishedInterrupted, .alreadyMigrated].contains(outcome))
        #expect(!fixture.exists(fixture.files.plainKeyPath))
        #expect(DeviceKeyStoreKind.of(directory: fixture.directory.path) == .tpm)
        let sealedKey = try fixture.tpmStore.load(from: fixture.files)
        defer { sealedKey.wipe() }
        #expect(sealedKey.constantTimeEquals(plainKey), "the key sealed is not the device's")
        try fixture.reboot()
        try fixture.unlock()
    }

    @Test("a boot that finds both files prefers uid.tpm and finishes the migration; a failed unlink there fails the boot and keeps both")
    func bootFinishesAnInterruptedMigration() throws {
        let fixture = try fileDevice()
        #expect(throws: SimulatedCrash(point: .migrationVerified)) {
            try FaultPoint.$plan.withValue(.init(.migrationVerified)) {
                _ = try DeviceKeyMigration.migrate(stateDirectory: fixture.directory.path, to: fixture.tpmStore)
            }
        }
        #expect(fixture.exists(fixture.files.plainKeyPath) && fixture.exists(fixture.files.sealedKeyPath))
        #expect(fixture.files.storeKindForBoot == .tpm)
        #expect(errorCode { try fixture.reboot(keyStore: FileDeviceKeyStore()) } == "key-store-mismatch")

        #expect(errorCode { try FaultPoint.$plan.withValue(.init(.migrationRemovingPlainKey, .fail(.ioError))) { try fixture.reboot() } } == "io-error")
        #expect(fixture.exists(fixture.files.plainKeyPath) && fixture.exists(fixture.files.sealedKeyPath))

        try fixture.reboot()
        #expect(!fixture.exists(fixture.files.plainKeyPath))
        try fixture.unlock()
    }

    @Test("a uid.tpm holding another key than uid.key is never taken for the migration's: nothing is removed")
    func differentKeysAreNeverMerged() throws {
        let fixture = try fileDevice()
        let other = try SecureBytes.random(count: 32)
        try fixture.tpmStore.keep(other, in: fixture.files)
        let error = errorMessage { _ = try DeviceKeyMigration.migrate(stateDirectory: fixture.directory.path, to: fixture.tpmStore) }
        #expect(error?.contains("hold different device keys") == true, "\(error ?? "nothing thrown")")
        #expect(fixture.exists(fixture.files.plainKeyPath) && fixture.exists(fixture.files.sealedKeyPath))
    }

    @Test("a migration refuses a key that is not the device's, a running device, an erased device, and a move back to a file")
    func refusals() throws {
        let fixture = try fileDevice()
        #expect(errorCode { _ = try DeviceKeyMigration.migrate(stateDirectory: fixture.directory.path, to: FileDeviceKeyStore()) }
            == "invalid-device-setting")
        try fixture.reboot(keyStore: FileDeviceKeyStore())
        #expect(errorCode { _ = try DeviceKeyMigration.migrate(stateDirectory: fixture.directory.path, to: fixture.tpmStore) }
            == "state-in-use")
        fixture.powerOff()

        // A foreign uid.key (another device's): its state file's tag does not verify with it; nothing sealed.
        let original = try fixture.bytes(fixture.files.plainKeyPath)
        try FileManager.default.removeItem(atPath: fixture.files.plainKeyPath)
        try SecureFile.writeSecret(SecureBytes.random(count: 32), to: fixture.files.plainKeyPath, in: .real)
        #expect(errorCode { _ = try DeviceKeyMigration.migrate(stateDirectory: fixture.directory.path, to: fixture.tpmStore) }
            == "device-state-damaged")
        #expect(!fixture.exists(fixture.files.sealedKeyPath))
        try FileManager.default.removeItem(atPath: fixture.files.plainKeyPath)
        try Data(original).write(to: URL(fileURLWithPath: fixture.files.plainKeyPath))
        #expect(chmod(fixture.files.plainKeyPath, 0o600) == 0)

        let wiped = try TPMFixture(keyStore: FileDeviceKeyStore(), wipeAfterFailures: 1)
        try wiped.reboot(keyStore: FileDeviceKeyStore())
        #expect(errorCode { try wiped.unlock("0000") } == "device-wiped")
        wiped.powerOff()
        #expect(errorCode { _ = try DeviceKeyMigration.migrate(stateDirectory: wiped.directory.path, to: wiped.tpmStore) }
            == "device-wiped")
    }
}
