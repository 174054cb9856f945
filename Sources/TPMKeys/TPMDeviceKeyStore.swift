public import ProtectedData
public import SecureKeys

/// The device key sealed by a TPM 2.0, in `hardware/uid.tpm` (<doc:/SecureKeys/KeyFileFormats>, "Sealed device key").
///
/// The key is a keyed-hash sealed-data object under the owner hierarchy's primary storage key, made from a
/// fixed template, so it is derived again after every reboot; the object can be neither duplicated nor moved
/// (`fixedTPM`, `fixedParent`), and its private area is encrypted by a key that never leaves the TPM. A copy
/// of the state directory is therefore useless on another machine, and gives no offline guessing of the
/// passcode (whose key is entangled with this one). A file sealed by another TPM — or by this one before its
/// owner hierarchy was cleared — is refused with `DeviceError.Code.sealedByAnotherTPM`.
///
/// The key travels to and from the TPM in an encrypted session; unsealed, it goes straight into
/// `SecureBytes`, and every TPM buffer that held it is zeroed before it is freed.
public struct TPMDeviceKeyStore: DeviceKeyStore {
    /// The kernel's TPM resource manager, which a real machine uses.
    public static let defaultTCTI = "device:/dev/tpmrm0"

    /// How commands reach the TPM, as a tpm2-tss TCTI configuration.
    ///
    /// For example `device:/dev/tpmrm0` or `swtpm:host=127.0.0.1,port=2321`.
    public let tcti: String

    /// A store on the TPM at `tcti`. Nothing is opened until the key is kept or loaded.
    ///
    /// - Parameter tcti: the TCTI configuration; ``defaultTCTI`` on a real machine, a software TPM's in tests.
    public init(tcti: String = TPMDeviceKeyStore.defaultTCTI) { self.tcti = tcti }

    /// `DeviceKeyStoreKind/tpm`.
    public var kind: DeviceKeyStoreKind { .tpm }

    /// The store for the device in `stateDirectory`.
    ///
    /// It is the one its files say it uses. For a new device it is the TPM when one answers at `tcti`, else a 0600
    /// file: the TPM when there is one, the file as the fallback.
    ///
    /// - Parameters:
    ///   - stateDirectory: the device's state directory (it may not exist yet).
    ///   - tcti: how to reach the TPM (``defaultTCTI`` on a real machine).
    public static func automatic(for stateDirectory: String, tcti: String = defaultTCTI) -> any DeviceKeyStore {
        automaticChoice(for: stateDirectory, tcti: tcti).store
    }

    /// The store ``automatic(for:tcti:)`` picks, and why a new device falls back to a file.
    public struct AutomaticChoice: Sendable {
        /// The store for the device.
        public let store: any DeviceKeyStore
        /// The TPM's absence when the device is new and no TPM answered, so its key will be kept in a file.
        ///
        /// It is `TPMPresence/absent(tcti:reason:)`, and `nil` when the device's files chose, or a TPM answered.
        public let fallback: TPMPresence?
    }

    /// The store for the device in `stateDirectory`, as ``automatic(for:tcti:)`` picks it.
    ///
    /// It comes with the TPM's absence when a new device falls back to a file, which is what a caller tells the user.
    ///
    /// - Parameters:
    ///   - stateDirectory: the device's state directory (it may not exist yet).
    ///   - tcti: how to reach the TPM (``defaultTCTI`` on a real machine).
    public static func automaticChoice(for stateDirectory: String, tcti: String = defaultTCTI) -> AutomaticChoice {
        switch DeviceKeyFiles(stateDirectory: stateDirectory).storeKindForBoot {
        case .tpm?: return AutomaticChoice(store: TPMDeviceKeyStore(tcti: tcti), fallback: nil)
        case .file?: return AutomaticChoice(store: FileDeviceKeyStore(), fallback: nil)
        case nil:
            let presence = TPMPresence.detect(tcti: tcti)
            return presence.isPresent
                ? AutomaticChoice(store: TPMDeviceKeyStore(tcti: tcti), fallback: nil)
                : AutomaticChoice(store: FileDeviceKeyStore(), fallback: presence)
        }
    }

    /// Seals `key` and writes `hardware/uid.tpm` (a new file, mode 0600, atomically, folder synced).
    ///
    /// - Throws: `DeviceError.Code.tpmUnavailable`, `DeviceError.Code.tpmFailure`; `SecureKeysError` with
    ///   `already-exists` or `io-error`.
    public func keep(_ key: SecureBytes, in files: DeviceKeyFiles) throws {
        let tpm = try TPMConnection(tcti: tcti)
        let sealed: TPMConnection.Sealed
        do throws(TPMConnection.Failure) {
            sealed = try tpm.seal(key)
        } catch {
            throw error.underlying
        }
        try SecureFile.writeAtomically(SealedKeyFile(sealed: sealed).bytes, to: files.sealedKeyPath, replacing: false, in: files.fileSystem)
    }

    /// Reads `hardware/uid.tpm` and has the TPM unseal it.
    ///
    /// - Throws: `DeviceError.Code.sealedByAnotherTPM` when this TPM's storage key is not the one the file was
    ///   sealed under; `SecureKeysError` with `key-file-damaged` when the file is altered or the TPM refuses to
    ///   load it under the right key, or it does not hold a 32-byte key; `DeviceError.Code.tpmUnavailable`,
    ///   `DeviceError.Code.tpmFailure`.
    public func load(from files: DeviceKeyFiles) throws -> SecureBytes {
        let path = files.sealedKeyPath
        let file = try SealedKeyFile(decoding: try SecureFile.read(path, maximumSize: SealedKeyFile.maximumLength), path: path)
        let tpm = try TPMConnection(tcti: tcti)
        let key: SecureBytes
        do throws(TPMConnection.Failure) {
            key = try tpm.unseal(file.sealed)
        } catch .unseal(.otherPrimary) {
            throw DeviceError.sealedByAnotherTPM(path)
        } catch .unseal(.rejected(let why)) {
            throw SecureKeysError.damaged(
                "the TPM that sealed the device key refuses to load it (\(why)): the file was altered", path: path)
        } catch {
            throw error.underlying
        }
        guard key.count == 32 else {
            let count = key.count
            key.wipe()
            throw SecureKeysError.damaged("the sealed device key is \(count) bytes, a device key is 32", path: path)
        }
        return key
    }
}

extension TPMDeviceKeyStore: PasscodeSecretSealer {
    /// This store.
    ///
    /// The TPM seals a version-2 keybag's passcode secret, and checks and counts every passcode.
    public var passcodeSecretSealer: (any PasscodeSecretSealer)? { self }

    /// Seals `secret` in a dictionary-attack-protected keyed-hash object whose authValue is `authValue`.
    ///
    /// The object is under the same primary storage key as the device key. Returns the record (the `hardware/uid.tpm`
    /// format) the keybag keeps.
    ///
    /// - Throws: `DeviceError.Code.tpmUnavailable`, `DeviceError.Code.tpmFailure`.
    public func sealPasscodeSecret(_ secret: SecureBytes, authValue: SecureBytes) throws -> [UInt8] {
        let tpm = try TPMConnection(tcti: tcti)
        do throws(TPMConnection.Failure) {
            return SealedKeyFile(sealed: try tpm.seal(secret, kind: .passcodeSecret, authValue: authValue)).bytes
        } catch {
            throw error.underlying
        }
    }

    /// Has the TPM unseal the passcode secret in `sealed` for `authValue`.
    ///
    /// Every wrong one is a TPM authorization failure, which raises its lockout counter.
    ///
    /// - Throws: `SecureKeysError` with `wrong-passcode` when the TPM refuses `authValue`;
    ///   `DeviceError.Code.tpmLockout` when the TPM is in lockout (nothing was checked);
    ///   `key-file-damaged` when the record is altered or sealed under another storage key;
    ///   `DeviceError.Code.tpmUnavailable`, `DeviceError.Code.tpmFailure`.
    public func unsealPasscodeSecret(_ sealed: [UInt8], authValue: SecureBytes) throws -> SecureBytes {
        let what = "the keybag's sealed passcode secret"
        let record = try SealedKeyFile(decoding: sealed, path: what, kind: "sealed passcode secret")
        let tpm = try TPMConnection(tcti: tcti)
        do throws(TPMConnection.Failure) {
            return try tpm.unseal(record.sealed, kind: .passcodeSecret, authValue: authValue)
        } catch .unseal(.authorizationFailed) {
            throw SecureKeysError.wrongPasscode()
        } catch .unseal(.lockout) {
            let state = try? tpm.dictionaryAttackState()
            throw DeviceError.tpmLockout(
                counter: state?.counter, maximum: state?.maximum, interval: state.map { .seconds(Int64($0.interval)) })
        } catch .unseal(.otherPrimary) {
            throw SecureKeysError.damaged("\(what) was sealed under another TPM storage key than this TPM's")
        } catch .unseal(.rejected(let why)) {
            throw SecureKeysError.damaged("the TPM refuses to load \(what) (\(why)): the keybag was altered")
        } catch {
            throw error.underlying
        }
    }
}
