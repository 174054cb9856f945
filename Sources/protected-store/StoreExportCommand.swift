import ArgumentParser
import EncryptedSQLite
import ProtectedStore
import SecureKeys

extension ProtectedStoreCommand.Store {
    /// `store export --to FILE` writes a copy of the store the user can take away.
    ///
    /// The copy is in the clear only when asked for by name, otherwise under a key or passphrase of theirs.
    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy the store into a new file: encrypted under your key file or passphrase, or (--plaintext) in the clear.",
            discussion: """
                Asks for the device's passcode (echo off at a terminal; the first line of a pipe) and copies the \
                store as of one moment, while an app may be using it (through `device serve`, where the passcode is \
                checked and counted as an unlock attempt even when the device is unlocked already). Exactly one of: \
                --key-file FILE (a 32-byte key of yours, a 0600 file: the export is a SQLCipher file in format 1, \
                keyed with it raw), --passphrase (asked for twice at a terminal, the next line of a pipe: the key \
                is Argon2id of it, 3 passes over 64 MiB, with the 16-byte salt the export's first bytes hold), or \
                --plaintext (a plain SQLite file that sqlite3 opens: everything in it is readable by whoever \
                reads the file; a warning says so). keys/README.md, "Exports", says how another program opens \
                each. The copy is written under a temporary name beside FILE (0600), synced and then linked to \
                FILE: never over an existing file (already-exists), and after a crash FILE is absent or whole.
                """)

        @OptionGroup var device: StoreDeviceOptions

        @Option(name: .customLong("to"), help: "The new file (it must not exist).")
        var destination: String

        @Flag(name: .customLong("plaintext"), help: "Write a plain, unencrypted SQLite file. Everything in the store becomes readable by whoever reads it.")
        var plaintext = false

        @Option(name: .customLong("key-file"), help: "Encrypt under the 32 bytes in this file (yours; mode 0600).")
        var keyFile: String?

        @Flag(name: .customLong("passphrase"), help: "Encrypt under a passphrase (asked for), stretched with Argon2id.")
        var passphrase = false

        @OptionGroup var logging: LoggingOptions

        func validate() throws {
            let chosen = [plaintext, keyFile != nil, passphrase].filter { $0 }.count
            guard chosen == 1 else {
                throw ValidationError(
                    "choose how the export is written: --key-file FILE or --passphrase (encrypted), or --plaintext (in the clear)")
            }
        }

        @MainActor
        func run() async throws {
            logging.bootstrap()
            // Said before any passcode is asked for (the export checks both again before it writes its file).
            do {
                try StateDirectoryTarget.checkOutside(device.stateDirectory, target: destination, what: "the export")
            } catch {
                throw StoreError(wrapping: error)
            }
            if SecureFile.exists(destination) {
                throw StoreError(
                    code: .alreadyExists,
                    message: "a file is already there; an export never replaces one (choose another name, or remove it first): \(destination)")
            }
            let prompt = PasscodePrompt(input: try StandardInput())
            let access = try StoreDeviceAccess.open(device, prompt: prompt, command: "store export", agentAllowed: true)
            defer { access.end() }
            var secret: SecureBytes?
            defer { secret?.wipe() }
            let encryption: ExportEncryption
            let said: String
            if let keyFile {
                secret = try Self.readKeyFile(keyFile)
                encryption = .key(secret!)
                said = "encrypted under the key in \(keyFile) (SQLCipher, format 1, raw key)"
            } else if passphrase {
                secret = try Self.askPassphrase(prompt)
                encryption = .passphrase(secret!)
                said = "encrypted under your passphrase (Argon2id, 3 passes, 64 MiB, salt in the file's first 16 bytes; SQLCipher format 1)"
            } else {
                StandardError.write(
                    "warning: --plaintext writes every value of the store UNENCRYPTED to \(destination): anyone who can read that file — or a copy, a backup, or the disk after it is deleted — reads your data. It is created 0600; move it only where you mean to, and delete it when you are done.")
                encryption = .plaintext
                said = "in the clear (plain SQLite)"
            }
            try await StoreCoordinator.export(
                StoreConfiguration(path: device.storePath), keys: access.keys, to: destination, encryption: encryption)
            print("exported \(device.storePath) to \(destination), \(said)")
        }

        /// A key file of the user's.
        ///
        /// It must be 32 bytes, a regular file of theirs, 0600; it is refused otherwise.
        static func readKeyFile(_ path: String) throws -> SecureBytes {
            let key: SecureBytes
            do {
                key = try SecureFile.readSecret(path)
            } catch {
                throw StoreError(wrapping: error)
            }
            guard key.count == 32 else {
                key.wipe()
                throw StoreError(
                    code: .invalidArgument,
                    message: "an export key file holds exactly 32 bytes (e.g. `head -c 32 /dev/urandom > FILE; chmod 600 FILE`), this one \(key.count): \(path)")
            }
            return key
        }

        /// The passphrase, never empty.
        ///
        /// It is read twice at a terminal (they must match), once from a pipe.
        @MainActor
        static func askPassphrase(_ prompt: PasscodePrompt) throws -> SecureBytes {
            let first = try prompt.existing("export passphrase", for: "store export").bytes
            guard first.count > 0 else {
                first.wipe()
                throw ValidationError("an empty passphrase is refused: the export would open for anyone")
            }
            guard prompt.input.isTerminal else { return first }
            let second = try prompt.existing("export passphrase again", for: "store export").bytes
            defer { second.wipe() }
            guard first.constantTimeEquals(second) else {
                first.wipe()
                throw ValidationError("the two passphrases differ; nothing was exported")
            }
            return first
        }
    }
}
