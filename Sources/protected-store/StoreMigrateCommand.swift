import ArgumentParser
import EncryptedSQLite
import ProtectedStore
import SecureKeys

extension ProtectedStoreCommand.Store {
    /// `store migrate` rewrites the store into SQLCipher 4's format (format 2), crash-safely.
    struct Migrate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rewrite the store into SQLCipher 4's format (format 2, HMAC-SHA512); needs SQLCipher 4 or later.",
            discussion: """
                Refused (migration-unsupported) before anything is asked or touched when the program is linked with \
                SQLCipher 3 — Debian bookworm's 3.4.1 — which cannot write format 2. Otherwise it asks for the \
                passcode, and needs the store closed everywhere (no device agent, no app): sqlcipher_export copies \
                the store into STORE.rewrite, which is checked (integrity_check), then the key file is replaced by \
                one recording format 2 — the commit point — and the copy renamed over the store. A power cut at any \
                step leaves the old store with its key file, or the new one with its own; the next attach finishes \
                or undoes what it finds. Prints migrated FROM to TO, or already in format N.
                """)

        @OptionGroup var device: StoreDeviceOptions
        @OptionGroup var logging: LoggingOptions

        @MainActor
        func run() async throws {
            logging.bootstrap()
            let target = StoreFormat.migrationTarget
            // Before the passcode prompt and before any file is opened.
            let library = Database.linkedSQLCipher
            guard let library, library.major >= target.compatibility else {
                throw StoreError.migrationUnsupported(to: target, library: library)
            }
            let prompt = PasscodePrompt(input: try StandardInput())
            let access = try StoreDeviceAccess.open(device, prompt: prompt, command: "store migrate", agentAllowed: false)
            defer { access.end() }
            switch try await StoreCoordinator.migrate(StoreConfiguration(path: device.storePath), keys: access.keys, to: target) {
            case .migrated(let from, let to): print("migrated \(device.storePath) from \(from) to \(to)")
            case .alreadyInFormat(let format): print("\(device.storePath) is already in \(format)")
            }
        }
    }
}
