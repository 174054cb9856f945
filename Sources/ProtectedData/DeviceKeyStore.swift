package import DiskModel
import Foundation
public import SecureKeys

/// The files a device's key may be kept in.
///
/// They are in its state directory's `hardware/` folder, which stands for the secure element of a phone.
///
/// - `hardware/uid.key`: the key itself, 32 bytes, mode 0600 (``FileDeviceKeyStore``);
/// - `hardware/uid.tpm`: the key sealed by a TPM 2.0 (the TPM store of the `TPMKeys` module; format in
///   <doc:/SecureKeys/KeyFileFormats>, "Sealed device key").
///
/// Both exist at once only in the instant of a migration from the file to the TPM (``DeviceKeyMigration``),
/// which the next boot or migration finishes.
public struct DeviceKeyFiles: Sendable, Hashable {
    /// The device's state directory.
    public let stateDirectory: String
    /// The file system the files are written in.
    package let fileSystem: FileSystem

    /// The files of the device in `stateDirectory`.
    ///
    /// - Parameter stateDirectory: the device's state directory.
    public init(stateDirectory: String) { self.init(stateDirectory: stateDirectory, fileSystem: .real) }

    /// The files of the device in `stateDirectory`, written in `fileSystem`.
    package init(stateDirectory: String, fileSystem: FileSystem) {
        self.stateDirectory = stateDirectory
        self.fileSystem = fileSystem
    }

    /// `hardware/`, the folder that holds the device key.
    public var folder: String { stateDirectory + "/hardware" }
    /// The device key in a file, `hardware/uid.key`.
    public var plainKeyPath: String { folder + "/uid.key" }
    /// The device key sealed by a TPM, `hardware/uid.tpm`.
    public var sealedKeyPath: String { folder + "/uid.tpm" }

    /// The file a store of `kind` keeps the key in.
    ///
    /// - Parameter kind: the kind of store.
    public func path(for kind: DeviceKeyStoreKind) -> String {
        switch kind {
        case .file: plainKeyPath
        case .tpm: sealedKeyPath
        }
    }

    /// The kind of store a boot of this device needs.
    ///
    /// It is `tpm` when `hardware/uid.tpm` exists (boot prefers it, and finishes a migration that left both
    /// files), `file` when only `hardware/uid.key` does, `nil` when neither does. `--key-store auto` picks this.
    public var storeKindForBoot: DeviceKeyStoreKind? {
        if SecureFile.exists(sealedKeyPath) { return .tpm }
        if SecureFile.exists(plainKeyPath) { return .file }
        return nil
    }

    /// Both files, the plain one first, as an erase removes them.
    var all: [String] { [plainKeyPath, sealedKeyPath] }
}

/// Where a device keeps its device key.
///
/// It is in a file (`file`), or sealed by the machine's TPM (`tpm`).
public enum DeviceKeyStoreKind: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// Sealed by a TPM 2.0, in `hardware/uid.tpm`.
    ///
    /// It is useless without that TPM.
    case tpm
    /// A 0600 file, `hardware/uid.key`.
    ///
    /// It is the fallback without a TPM.
    case file

    /// `tpm` or `file`.
    public var description: String { rawValue }

    /// Which store keeps the key of the device in `directory`, from the files there.
    ///
    /// It is `file` while `hardware/uid.key` exists. That holds also in the instant of an interrupted migration,
    /// as the key is then still on disk unsealed, and a status must not call it migrated. It is `tpm` when only
    /// `hardware/uid.tpm` exists, `nil` when neither does (no device, or an erased one).
    ///
    /// - Parameter directory: the device's state directory.
    public static func of(directory: String) -> DeviceKeyStoreKind? {
        let files = DeviceKeyFiles(stateDirectory: directory)
        if SecureFile.exists(files.plainKeyPath) { return .file }
        if SecureFile.exists(files.sealedKeyPath) { return .tpm }
        return nil
    }
}

/// Keeps a device's key.
///
/// The key is the secret every class key is entangled with (<doc:/SecureKeys/KeyFileFormats>, "Keybag").
///
/// A store never replaces a key it keeps and never writes one unwrapped except as ``FileDeviceKeyStore``
/// does by definition. ``KeybagDevice`` takes one at set-up and boot; ``FileDeviceKeyStore`` is the default.
public protocol DeviceKeyStore: Sendable {
    /// Which kind of store this is, and so which file of ``DeviceKeyFiles`` it keeps.
    var kind: DeviceKeyStoreKind { get }

    /// Keeps `key`, a new device key, in a new file (`files.path(for: kind)`).
    ///
    /// The file is written atomically with mode 0600, its folder synced, never replacing a file.
    ///
    /// - Parameters:
    ///   - key: the 32-byte device key.
    ///   - files: the device's key files.
    /// - Throws: `SecureKeysError` with `already-exists` when the file exists, `io-error` when it cannot be
    ///   written; the store's own errors (a TPM that cannot be reached).
    func keep(_ key: SecureBytes, in files: DeviceKeyFiles) throws

    /// The device key kept in `files`.
    ///
    /// - Parameter files: the device's key files.
    /// - Returns: the 32-byte key, which the caller wipes.
    /// - Throws: `SecureKeysError` with `key-file-damaged` naming the file when it is not a key this store
    ///   wrote; the store's own errors.
    func load(from files: DeviceKeyFiles) throws -> SecureBytes

    /// What seals the passcode secret of a version-2 keybag on this store.
    ///
    /// See <doc:/SecureKeys/KeyFileFormats>, "Keybag, version 2". A TPM seals it, and then counts every wrong passcode. `nil` for a
    /// store that cannot (the file store), whose devices keep a version-1 keybag.
    var passcodeSecretSealer: (any PasscodeSecretSealer)? { get }
}

extension DeviceKeyStore {
    /// `nil`, as a store seals no passcode secret unless it says so.
    public var passcodeSecretSealer: (any PasscodeSecretSealer)? { nil }
}

/// The device key in a file, `hardware/uid.key`.
///
/// The file holds 32 raw bytes, mode 0600. It is the simulated device's stand-in for a hardware key, and the
/// fallback on a machine without a TPM.
public struct FileDeviceKeyStore: DeviceKeyStore {
    /// The file store.
    public init() {}

    /// ``DeviceKeyStoreKind/file``.
    public var kind: DeviceKeyStoreKind { .file }

    /// Writes `key` to `hardware/uid.key` (a new file, atomically, folder synced).
    ///
    /// - Throws: `SecureKeysError` with `already-exists` or `io-error`.
    public func keep(_ key: SecureBytes, in files: DeviceKeyFiles) throws {
        try SecureFile.writeSecret(key, to: files.plainKeyPath, in: files.fileSystem)
    }

    /// Reads `hardware/uid.key`.
    ///
    /// The file holds 32 bytes, or it is damaged. The damage is said of that file, not of the keybag it would
    /// fail to verify.
    ///
    /// - Throws: `SecureKeysError` with `key-file-damaged` naming the file for another length; `io-error`.
    public func load(from files: DeviceKeyFiles) throws -> SecureBytes {
        let path = files.plainKeyPath
        let deviceKey = try SecureFile.readSecret(path)
        guard deviceKey.count == 32 else {
            let count = deviceKey.count
            deviceKey.wipe()
            throw SecureKeysError.damaged("the device key \(path) is \(count) bytes, a device key is 32", path: path)
        }
        return deviceKey
    }
}

extension DeviceKeyFiles {
    /// The device key, read by `store`, from the file of the store's kind.
    ///
    /// It first checks that the device keeps its key there. When both files exist (a migration to the TPM stopped
    /// after the sealed file was written), the sealed one is preferred, and the migration finished. The plain
    /// file is removed, and its folder synced, only once it holds the very key the TPM unsealed.
    ///
    /// - Throws: `DeviceError.Code.keyStoreMismatch` when the device keeps its key in the other store;
    ///   the store's errors; `SecureKeysError` with `key-file-damaged` when the two files hold different keys
    ///   (both left as they are).
    func readDeviceKey(with store: any DeviceKeyStore) throws -> SecureBytes {
        let sealed = SecureFile.exists(sealedKeyPath)
        let plain = SecureFile.exists(plainKeyPath)
        if sealed || plain {
            let kept: DeviceKeyStoreKind = sealed ? .tpm : .file
            guard store.kind == kept else {
                throw DeviceError.keyStoreMismatch(
                    stateDirectory, kept: kept, given: store.kind,
                    servedByAgent: SecureFile.exists(DeviceLayout(root: stateDirectory, fileSystem: fileSystem).agentDirectory))
            }
        }
        let key = try store.load(from: self)
        if sealed && plain {
            do {
                try finishMigration(unsealed: key)
            } catch {
                key.wipe()
                throw error
            }
        }
        return key
    }

    /// Removes `hardware/uid.key` once it is shown to hold `unsealed`, and syncs the folder.
    ///
    /// `unsealed` is the key `hardware/uid.tpm` gave. This is the last step of a migration to the TPM.
    ///
    /// - Throws: `SecureKeysError` with `key-file-damaged` when the keys differ (nothing removed), `io-error`.
    func finishMigration(unsealed: SecureBytes) throws {
        let plainKey = try FileDeviceKeyStore().load(from: self)
        defer { plainKey.wipe() }
        guard plainKey.constantTimeEquals(unsealed) else {
            throw SecureKeysError.damaged(
                "\(plainKeyPath) and \(sealedKeyPath) hold different device keys (a migration to the TPM left both); "
                    + "both were left as they are", path: plainKeyPath)
        }
        if case .fail(let code)? = FaultPoint.planned(at: .migrationRemovingPlainKey, path: plainKeyPath) {
            throw SecureKeysError.io("cannot remove", path: plainKeyPath, errno: code)
        }
        try DiskIO.unlink(plainKeyPath, in: fileSystem)
        try FaultPoint.reach(.migrationRemovedPlainKey)
        try DiskIO.syncDirectory(folder, in: fileSystem)
    }
}
