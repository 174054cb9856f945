package import DiskModel
import Foundation
import SecureKeys

/// Moves a device's key from its file into a TPM when a TPM appears, crash-safe.
///
/// The key moves from `hardware/uid.key` to `hardware/uid.tpm`. It is never lost, and never both still on disk unsealed
/// and called migrated.
///
/// The steps, each durable before the next:
/// 1. the plain key is read and checked against the device (its state file's tag);
/// 2. the same key is sealed and `hardware/uid.tpm` written atomically (temporary file, `fsync`, `link`,
///    `fsync` of the folder);
/// 3. the sealed file is unsealed again, and must give the very same key;
/// 4. `hardware/uid.key` is removed and the folder synced.
///
/// A crash before step 2 ends leaves only the plain file: nothing happened. A crash after it leaves both, which
/// boot (preferring the sealed file) and the next migration both finish by steps 3 and 4.
/// ``DeviceKeyStoreKind/of(directory:)`` says `file` for as long as the plain file exists.
public enum DeviceKeyMigration: Sendable {
    /// What a migration did.
    public enum Outcome: Sendable, Hashable {
        /// The key was sealed, and its file removed.
        case migrated
        /// A migration that had stopped after sealing was finished (the plain file removed).
        case finishedInterrupted
        /// The key was already sealed, with no plain file left.
        ///
        /// Nothing was done.
        case alreadyMigrated
    }

    /// Seals the device key of the device in `stateDirectory` with `store`, and removes its plain file.
    ///
    /// The device must be powered off: the migration takes the state directory's lock (or uses `ownership`).
    ///
    /// - Parameters:
    ///   - stateDirectory: the device's state directory.
    ///   - store: where the key goes; only a ``DeviceKeyStoreKind/tpm`` store: a sealed key is never unsealed
    ///     into a file.
    ///   - ownership: the directory's lock, when the caller holds it; `nil`: taken and released here.
    /// - Returns: what was done.
    /// - Throws: `DeviceError.Code.invalidDeviceSetting` for a store of kind `file`; `DeviceError.Code.stateInUse`;
    ///   `DeviceError.Code.noDevice`; `DeviceError.Code.deviceWiped` for an erased device;
    ///   `DeviceError.Code.deviceStateDamaged` when the plain key is not this device's (its state file's tag does not
    ///   verify); `SecureKeysError` with `key-file-damaged` when the sealed file gives another key (both files
    ///   left); the store's errors. After any error the plain key is still on disk.
    public static func migrate(
        stateDirectory: String, to store: any DeviceKeyStore, ownership: StateDirectoryLock? = nil
    ) throws -> Outcome {
        guard store.kind == .tpm else {
            throw DeviceError.invalidSetting("a device key migrates from its file to a TPM only: a sealed key is never unsealed into a file")
        }
        let lock = try ownership ?? StateDirectoryLock.acquire(stateDirectory)
        defer { if ownership == nil { lock.release() } }
        let layout = DeviceLayout(root: stateDirectory, fileSystem: .real)
        guard SecureFile.exists(layout.statePath) else { throw DeviceError.noDevice(at: stateDirectory) }
        let contents = try DeviceStateFile.load(from: layout.statePath)
        if contents.state.wiped { throw DeviceError.deviceWiped() }
        let files = layout.keyFiles
        let wasSealed = SecureFile.exists(files.sealedKeyPath)
        guard SecureFile.exists(files.plainKeyPath) else {
            if wasSealed { return .alreadyMigrated }
            // Neither file: the read names the missing plain file.
            _ = try FileDeviceKeyStore().load(from: files)
            return .alreadyMigrated
        }
        if !wasSealed {
            let plainKey = try FileDeviceKeyStore().load(from: files)
            defer { plainKey.wipe() }
            // Only this device's key is sealed: a foreign uid.key would otherwise be made permanent.
            try DeviceStateFile.verify(contents, deviceKey: plainKey, path: layout.statePath)
            try store.keep(plainKey, in: files)
            try FaultPoint.reach(.migrationSealed)
        }
        let unsealed = try store.load(from: files)
        defer { unsealed.wipe() }
        if FaultPoint.planned(at: .migrationVerified) == .crash {
            // The check below happens inside finishMigration; a crash after it is one before the unlink.
            let plainKey = try FileDeviceKeyStore().load(from: files)
            defer { plainKey.wipe() }
            if plainKey.constantTimeEquals(unsealed) { throw SimulatedCrash(point: .migrationVerified) }
        }
        try files.finishMigration(unsealed: unsealed)
        return wasSealed ? .finishedInterrupted : .migrated
    }
}

extension FaultPoint {
    /// A migration to a sealed device key made the sealed file durable, before it is unsealed again (the write
    /// itself stops at ``FaultPoint/atomicWrite(_:)`` with a path suffix of `uid.tpm`).
    package static let migrationSealed = FaultPoint("migration sealed")
    /// A migration showed the sealed file holds the key, before the plain file is removed.
    package static let migrationVerified = FaultPoint("migration verified")
    /// A migration removes the plain key file (``FaultPoint/Effect/fail(_:)``).
    package static let migrationRemovingPlainKey = FaultPoint("migration removing the plain key")
    /// A migration unlinked the plain key file, before its folder is synced.
    package static let migrationRemovedPlainKey = FaultPoint("migration removed the plain key")
}
