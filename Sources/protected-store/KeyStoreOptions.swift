import ArgumentParser
import Foundation
import ProtectedData
import SecureKeys
import TPMKeys

/// Where a device keeps its key, as `--key-store` names it.
enum KeyStoreChoice: String, ExpressibleByArgument, CaseIterable {
    /// Sealed by the TPM at `--tpm-tcti`.
    case tpm
    /// A 0600 file.
    case file
    /// The store a device already uses (from its files).
    ///
    /// For a new device it is the TPM when one answers at `--tpm-tcti`, else the file.
    case auto
}

/// The key store a command uses when `--key-store` is not given.
protocol KeyStoreDefault {
    /// The store.
    static var choice: KeyStoreChoice { get }
}

/// The file, the default of `shell`, `run` and the `store` commands.
///
/// It is their default, as the simulated device is the default of scripts, `shell` and `demo`.
enum FileKeyStoreByDefault: KeyStoreDefault {
    static var choice: KeyStoreChoice { .file }
}

/// `auto`, the default of `device serve`, the agent a desktop runs as a user service.
///
/// A device boots with the key store its files say, and a new one is set up on the TPM when there is one.
enum AutomaticKeyStoreByDefault: KeyStoreDefault {
    static var choice: KeyStoreChoice { .auto }
}

/// `--key-store tpm|file|auto` and `--tpm-tcti`, where a device keeps its key.
///
/// See keys/README.md, "Sealed device key". `Default` applies when they are not given.
struct KeyStoreOptions<Default: KeyStoreDefault>: ParsableArguments {
    @Option(
        name: .customLong("key-store"),
        help: "Where the device keeps its key: tpm (sealed by the TPM), file (hardware/uid.key), or auto (what the device uses; for a new one, the TPM if present).")
    var keyStore: KeyStoreChoice = Default.choice

    @Option(
        name: .customLong("tpm-tcti"),
        help: "How to reach the TPM: a tpm2-tss TCTI (device:/dev/tpmrm0, or swtpm:host=127.0.0.1,port=2321 for a software TPM).")
    var tcti = TPMDeviceKeyStore.defaultTCTI

    /// The store for the device in `stateDirectory`.
    ///
    /// tpm2-tss's own log lines (a TCTI that cannot connect) are turned off unless `TSS2_LOG` says otherwise:
    /// the errors thrown say the same, once. With `auto`, a new device that falls back to a file because no
    /// TPM answers says so on standard error, with the reason, in one line.
    func store(for stateDirectory: String) -> any DeviceKeyStore {
        setenv("TSS2_LOG", "all+NONE", 0)
        switch keyStore {
        case .tpm: return TPMDeviceKeyStore(tcti: tcti)
        case .file: return FileDeviceKeyStore()
        case .auto:
            let choice = TPMDeviceKeyStore.automaticChoice(for: stateDirectory, tcti: tcti)
            if case .absent(let tcti, let reason)? = choice.fallback {
                StandardError.write(
                    "note: no TPM at \(tcti) (\(reason)): a device set up here keeps its key in a file, "
                        + "\(DeviceKeyFiles(stateDirectory: stateDirectory).plainKeyPath); `device migrate-key --to tpm` "
                        + "moves it into a TPM later")
            }
            return choice.store
        }
    }
}

extension ProtectedStoreCommand.Device {
    /// `device migrate-key --to tpm` moves the device key from its file into the TPM.
    ///
    /// The keybag moves to version 2, whose passcode the TPM checks.
    struct MigrateKey: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "migrate-key",
            abstract: "Move a device's key into the machine's TPM (hardware/uid.tpm), and its keybag to version 2, whose passcode the TPM checks.",
            discussion: """
                The device must not be running (no shell, script or agent on the state directory). The same key is \
                sealed by the TPM, written to hardware/uid.tpm (atomically, synced), unsealed again and compared, \
                and only then is hardware/uid.key removed and its folder synced. Interrupted at any point, the key \
                is kept: run the command again (or boot the device with --key-store tpm) to finish. Prints the \
                TPM found, then migrated, finished (an interrupted migration was completed) or already-migrated. \
                Then, for a keybag of version 1, it asks for the passcode (checked and counted as an unlock attempt) \
                and writes the keybag again as version 2 — the same class keys, also wrapped with a secret the TPM \
                releases only for the passcode — atomically: the old keybag is the device's until the rename. \
                Prints keybag: moved to version 2, or keybag: version 2 already.
                """)

        @Option(name: .customLong("state-dir"), help: "The device's state directory.")
        var stateDirectory = "protected-store-state"

        @Option(name: .customLong("to"), help: "Where the key goes: tpm (the only target: a sealed key is never unsealed into a file).")
        var target: String

        @Option(
            name: .customLong("tpm-tcti"),
            help: "How to reach the TPM: a tpm2-tss TCTI (device:/dev/tpmrm0, or swtpm:host=127.0.0.1,port=2321).")
        var tcti = TPMDeviceKeyStore.defaultTCTI

        @OptionGroup var logging: LoggingOptions

        func validate() throws {
            guard target == "tpm" else { throw ValidationError("--to must be tpm: a device key moves from its file into a TPM, never back") }
        }

        @MainActor
        func run() async throws {
            logging.bootstrap()
            setenv("TSS2_LOG", "all+NONE", 0)
            let presence = TPMPresence.detect(tcti: tcti)
            print("TPM \(presence)")
            guard presence.isPresent else {
                throw DeviceError(
                    code: .tpmUnavailable,
                    message: "no TPM 2.0 answers at \(tcti); the device key stays in \(DeviceKeyFiles(stateDirectory: stateDirectory).plainKeyPath)")
            }
            let outcome = try DeviceKeyMigration.migrate(stateDirectory: stateDirectory, to: TPMDeviceKeyStore(tcti: tcti))
            switch outcome {
            case .migrated: print("migrated: the device key is sealed in hardware/uid.tpm; hardware/uid.key was removed")
            case .finishedInterrupted: print("finished: an interrupted migration was completed; hardware/uid.key was removed")
            case .alreadyMigrated: print("already-migrated: the device key is sealed in hardware/uid.tpm")
            }
            try moveKeybag()
        }

        /// Boots the device on the TPM and moves its keybag to version 2 with the passcode asked for, unless it
        /// is version 2 already.
        @MainActor
        private func moveKeybag() throws {
            let ownership = try StateDirectoryLock.acquire(stateDirectory)
            defer { ownership.release() }
            let device = try KeybagDevice(bootingFrom: stateDirectory, keyStore: TPMDeviceKeyStore(tcti: tcti), ownership: ownership)
            defer { device.powerOff() }
            guard device.keybagVersion == Keybag.formatVersion else {
                print("keybag: version 2 already: the TPM checks the passcode")
                return
            }
            let passcode = try PasscodePrompt(input: try StandardInput()).existing("passcode", for: "device migrate-key")
            defer { passcode.bytes.wipe() }
            try device.sealPasscodeSecret(passcode: passcode.bytes)
            print("keybag: moved to version 2: the TPM checks the passcode, and counts every wrong one")
        }
    }
}
