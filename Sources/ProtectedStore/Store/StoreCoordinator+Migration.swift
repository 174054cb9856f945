public import EncryptedSQLite
internal import ProtectedData
public import SecureKeys

extension StoreCoordinator {
    /// What ``migrate(_:keys:to:)`` did.
    public enum MigrationOutcome: Sendable, Equatable {
        /// The store was rewritten into the format.
        ///
        /// It was in `from`.
        case migrated(from: StoreFormat, to: StoreFormat)
        /// The store was in the format already.
        ///
        /// Nothing was changed.
        case alreadyInFormat(StoreFormat)
    }

    /// Rewrites a closed store into `format` and records the format in its key file, crash-safely.
    ///
    /// The default format is SQLCipher 4's, HMAC-SHA512 (`StoreFormat/sqlcipher4Raw4096`). The store is copied
    /// with `sqlcipher_export` into a new file and checked, then the key file and the store file are replaced,
    /// the key file first as the one commit point. A power cut at any step leaves the old store with its old key
    /// file, or the new store with its new one. The next attach (or migration) finishes or undoes what it finds
    /// (<doc:/SecureKeys/KeyFileFormats>, *Rewriting a store*).
    ///
    /// Refused before anything is touched when the linked SQLCipher cannot write `format`: format 2 needs
    /// SQLCipher 4 or later, and Debian bookworm links 3.4.1.
    ///
    /// - Parameters:
    ///   - configuration: the store; it must not be attached anywhere (this process or another).
    ///   - keys: the source of its key, which must also be able to wrap it again in a key file
    ///     (`StoreKeyProvider.storeKeyFile(forStoreAt:recording:)`: the simulated and Linux devices and the
    ///     agent's client can). A rewrite replaces the store's key file at its commit point: it is about the
    ///     library's key files, and a source that keeps its keys elsewhere cannot migrate its stores. Its
    ///     stores are asked their format through `StoreKeyProvider.storeKeyRecord(forStoreAt:)` all the same,
    ///     so a store already in `format` is reported as such.
    ///   - format: the format to rewrite it into.
    /// - Returns: what was done.
    /// - Throws: `StoreError.Code.migrationUnsupported` naming the linked library and the format; `busy` when
    ///   the store is open; `protected-data-unavailable` when its class key is not held;
    ///   `store-unavailable` when there is no store; `key-source-unsupported` when `keys` keeps its keys
    ///   outside the library's key files (nothing is changed); the failures of SQLite and the disk.
    public static func migrate(
        _ configuration: StoreConfiguration, keys: any StoreKeyProvider, to format: StoreFormat = .migrationTarget
    ) async throws -> MigrationOutcome {
        let library = Database.linkedSQLCipher
        guard let library, library.major >= format.compatibility else {
            throw StoreError.migrationUnsupported(to: format, library: library)
        }
        return try await rewrite(configuration, keys: keys, to: format, evenInSameFormat: false)
    }

    /// The machinery of ``migrate(_:keys:to:)``, also for a rewrite into the store's own format.
    ///
    /// That is a compacting rewrite (`evenInSameFormat`), the only way to run it end to end on SQLCipher 3,
    /// where no other format can be written.
    package static func rewrite(
        _ configuration: StoreConfiguration, keys: any StoreKeyProvider, to format: StoreFormat, evenInSameFormat: Bool
    ) async throws -> MigrationOutcome {
        do {
            return try await StoreThread.runOnce(.writer) {
                let files = configuration.files
                try StoreRewrite.recover(files, in: configuration.fileSystem)
                let storeKey: SecureBytes
                switch try keys.lookUpStoreKey(forStoreAt: configuration.path) {
                case .available(let key): storeKey = key
                case .locked(let protectionClass): throw StoreError.protectedDataUnavailable(protectionClass)
                case .absent:
                    throw StoreError(
                        code: .storeUnavailable, message: "there is no store to migrate (its key source holds no key for it)",
                        path: files.database)
                }
                defer { storeKey.wipe() }
                let current = try keyRecord(configuration, keys: keys, after: "gave the store's key").storeFormat
                if current == format && !evenInSameFormat { return .alreadyInFormat(format) }
                let newKeyFile = try keys.storeKeyFile(forStoreAt: configuration.path, recording: format)
                switch try StoreRewrite.rewrite(files, storeKey: storeKey, newKeyFile: newKeyFile, to: format, in: configuration.fileSystem) {
                case .rewritten(let from): return .migrated(from: from, to: format)
                }
            }
        } catch {
            throw StoreError(wrapping: error)
        }
    }
}

extension StoreError {
    /// `migrate` to `format`, which the linked SQLCipher cannot write.
    ///
    /// `library` is the linked SQLCipher, or `nil` when the library is not SQLCipher.
    public static func migrationUnsupported(
        to format: StoreFormat, library: SQLCipherVersion?, function: String = #function, file: String = #fileID,
        line: Int = #line
    ) -> Self {
        let linked = library.map { "\($0)" } ?? "a SQLite that is not SQLCipher"
        return Self(
            code: .migrationUnsupported,
            message: "cannot migrate to \(format) (\(format.name)): it needs SQLCipher \(format.compatibility) or later, and this program is linked with \(linked); nothing was changed (keys/README.md, Threat model, says how to build against a newer SQLCipher)",
            function: function, file: file, line: line)
    }
}
