import ArgumentParser
import Foundation
import ProtectedData
import ProtectedStore
import SecureKeys
import Glibc
import SystemPackage

extension ProtectedStoreCommand {
    /// `store …`, what is done to the store as a whole (its backups).
    struct Store: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Work on a state directory's store as a whole: back it up, restore it, export it, migrate its format.",
            discussion: """
                A backup is one encrypted, authenticated file that only the recovery phrase opens; the device keeps \
                only the recovery key's public half (app.sqlite.recovery-key), so a backup never asks for the phrase \
                and only a restore does. Backup, restore and migrate need the device not running (no shell, script \
                or agent on the state directory); an export goes through a running `device serve`.
                """,
            subcommands: storeSubcommands)
    }
}

/// The `store` group's subcommands, one a line.
///
/// Other groups of subcommands (export, migrate) are added as lines of their own.
private let storeSubcommands: [any ParsableCommand.Type] = [
    ProtectedStoreCommand.Store.RecoveryKey.self,
    ProtectedStoreCommand.Store.Backup.self,
    ProtectedStoreCommand.Store.Restore.self,
    ProtectedStoreCommand.Store.Export.self,
    ProtectedStoreCommand.Store.Migrate.self,
]

extension StoreDeviceOptions {
    /// The public half of the recovery key backups are sealed to, beside the store.
    var recoveryKeyPath: String { SecureKeys.RecoveryKey.path(forStoreAt: storePath) }
}

extension ProtectedStoreCommand.Store {
    /// `store recovery-key create|show`.
    struct RecoveryKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "recovery-key",
            abstract: "Create the recovery phrase backups are sealed to (shown once), or show which one they are.",
            subcommands: [Create.self, Show.self])
    }

    /// `store backup --to FILE`.
    struct Backup: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write an encrypted backup of the store to FILE, sealed to the recovery key.",
            discussion: """
                Asks for the device's passcode (the store is read with its key). The copy is taken from one snapshot \
                while the store stays open, checked with PRAGMA integrity_check, and written to FILE atomically \
                (temporary, fsync, link, folder fsync): interrupted, it leaves no FILE or a whole one. FILE is never \
                replaced unless --replace. Prints the file, its size and the recovery key's fingerprint.
                """)

        @OptionGroup var location: StoreDeviceOptions
        @OptionGroup var logging: LoggingOptions

        @Option(name: .customLong("to"), help: "The backup file to write.")
        var file: String

        @Flag(name: .customLong("replace"), help: "Replace FILE if it exists (atomically).")
        var replace = false

        @MainActor
        func run() async throws {
            logging.bootstrap()
            // Said before any passcode is asked for (the backup checks again before it writes its file).
            do {
                try StateDirectoryTarget.checkOutside(location.stateDirectory, target: file, what: "the backup")
            } catch {
                throw StoreError(wrapping: error)
            }
            let recoveryKey: SecureKeys.RecoveryKey
            do {
                recoveryKey = try SecureKeys.RecoveryKey.load(from: location.recoveryKeyPath)
            } catch let error as SecureKeysError where error.code == .ioError && error.systemErrno == ENOENT {
                throw StoreError(
                    code: .invalidArgument,
                    message: "the store has no recovery key (\(location.recoveryKeyPath)): run `protected-store store recovery-key create` first and write the phrase down")
            }
            let access = try StoreDeviceAccess.open(
                location, prompt: PasscodePrompt(input: try StandardInput()), command: "store backup", agentAllowed: false)
            defer { access.end() }
            let device = access.keys
            // The class the store was created with, as the device's key source records it.
            guard let protectionClass = try device.storeKeyRecord(forStoreAt: location.storePath)?.protectionClass else {
                throw StoreError(
                    code: .storeUnavailable,
                    message: "there is no store to back up at \(location.storePath): the device holds no key for it (launch the app once to create it)",
                    path: location.storePath)
            }
            let coordinator = try await StoreCoordinator.attach(
                StoreConfiguration(path: location.storePath, protectionClass: protectionClass), keys: device)
            let summary: BackupSummary
            do {
                summary = try await coordinator.backup(to: file, recoveryKey: recoveryKey, replacingExisting: replace)
            } catch {
                await coordinator.close()
                throw error
            }
            await coordinator.close()
            print("backup written: \(summary.path) (\(summary.byteCount) bytes, \(summary.storeFormat)), sealed to recovery key \(summary.recoveryKeyFingerprint)")
        }
    }

    /// `store restore --from FILE`.
    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Restore a backup into this device's store, asking for the recovery phrase.",
            discussion: """
                Asks for the device's passcode (the new store's key is made by this device, under its class key) and \
                the recovery phrase. The backup is authenticated and integrity-checked before anything is replaced. \
                A store already there is refused (restore-target-exists) unless --replace, which keeps it — every one \
                of its files — in a folder app.sqlite.replaced-TIME-ID beside it, never deleted.
                """)

        @OptionGroup var location: StoreDeviceOptions
        @OptionGroup var logging: LoggingOptions

        @Option(name: .customLong("from"), help: "The backup file to restore.")
        var file: String

        @Flag(name: .customLong("replace"), help: "Replace a store already there, keeping it aside.")
        var replace = false

        @Option(help: "The new store's protection class (complete, complete-unless-open, complete-until-first-user-authentication, none).")
        var protection: String = "complete"

        func validate() throws {
            guard ProtectionClass.allCases.contains(where: { $0.name == protection }) else {
                throw ValidationError("--protection must be one of \(ProtectionClass.allCases.map(\.name).joined(separator: ", "))")
            }
        }

        @MainActor
        func run() async throws {
            logging.bootstrap()
            let prompt = PasscodePrompt(input: try StandardInput())
            let access = try StoreDeviceAccess.open(location, prompt: prompt, command: "store restore", agentAllowed: false)
            defer { access.end() }
            let device = access.keys
            let typed = try prompt.existing("recovery phrase", for: "store restore")
            let phrase: RecoveryPhrase
            do {
                defer { typed.bytes.wipe() }
                phrase = try RecoveryPhrase(typed: typed.bytes)
            }
            let protectionClass = ProtectionClass.allCases.first { $0.name == protection }!
            let summary = try await StoreBackup.restore(
                from: file, phrase: phrase,
                into: StoreConfiguration(path: location.storePath, protectionClass: protectionClass), keys: device,
                replacingExisting: replace)
            print("restored: \(summary.storePath) from \(file)")
            if let aside = summary.keptAside { print("the store that was there is kept in \(aside)") }
            if summary.recoveryKeyPath == nil {
                print("note: the recovery key file was not written; run `protected-store store recovery-key create` for the next backups")
            }
        }
    }
}

extension ProtectedStoreCommand.Store.RecoveryKey {
    /// `store recovery-key create`.
    struct Create: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a recovery phrase, print it once, and keep its public key beside the store.",
            discussion: """
                Write the phrase down: it is shown only now, kept nowhere, and a backup cannot be restored without \
                it. The device keeps app.sqlite.recovery-key (the public key, the Argon2id salt and cost: nothing \
                secret, mode 0600); an existing one is never replaced. Needs no passcode.
                """)

        @OptionGroup var location: StoreDeviceOptions
        @OptionGroup var logging: LoggingOptions

        @Flag(name: .customLong("fast-kdf"), help: "Argon2id at its minimal cost, for tests: the phrase becomes cheaper to guess.")
        var fastKDF = false

        func run() throws {
            logging.bootstrap()
            try SecureFile.createDirectory(at: location.stateDirectory, in: .real)
            let (phrase, key) = try SecureKeys.RecoveryKey.create(kdf: fastKDF ? .minimal : SecureKeys.RecoveryKey.defaultKDF)
            try key.write(to: location.recoveryKeyPath)
            print("recovery key \(key.fingerprint) written to \(location.recoveryKeyPath)")
            print("recovery phrase (write it down; it is not shown again):")
            fflush(nil)
            // Straight from guarded memory to the terminal: the phrase never becomes a Swift String.
            try phrase.text.withUnsafeBytes { bytes in _ = try? FileDescriptor.standardOutput.writeAll(bytes) }
            print("")
        }
    }

    /// `store recovery-key show`.
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show the recovery key backups are sealed to: its fingerprint and Argon2id cost (never the phrase).")

        @OptionGroup var location: StoreDeviceOptions
        @OptionGroup var logging: LoggingOptions

        func run() throws {
            logging.bootstrap()
            // The check every other command makes of the state directory before it reads a file in it.
            try PrivateDirectory.check(location.stateDirectory)
            let key = try SecureKeys.RecoveryKey.load(from: location.recoveryKeyPath)
            print("recovery key \(key.fingerprint) (\(location.recoveryKeyPath))")
            print("argon2id: \(key.kdf.opsLimit) passes, \(key.kdf.memLimit >> 10) KiB")
        }
    }
}
