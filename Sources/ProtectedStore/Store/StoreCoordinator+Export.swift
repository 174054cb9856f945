public import EncryptedSQLite
internal import SecureKeys

extension StoreCoordinator {
    /// Copies the store, as of one moment, into a new file the user can take away.
    ///
    /// The file is a plain SQLite file, or one encrypted under a key the user holds (`ExportEncryption`). It is
    /// never encrypted under the store key, which only this device's class key unwraps.
    /// <doc:/SecureKeys/KeyFileFormats> (*Exports*) says how another program opens each.
    ///
    /// Runs while the app does: on a connection and a thread of its own, in one read transaction (WAL), so
    /// writes go on meanwhile and the copy holds exactly the transactions committed before it began. The
    /// copy is written under a temporary name beside `destination` (mode 0600 from its creation), synced,
    /// and given its name with `link(2)`, never over an existing file: after a crash there is no file at
    /// `destination`, or the whole copy (`Database.export(to:encryption:)`).
    ///
    /// - Parameters:
    ///   - destination: the new file; its folder must exist.
    ///   - encryption: how the copy is encrypted; `ExportEncryption.plaintext` only when the user asked for
    ///     their data in the clear.
    /// - Throws: `StoreError.Code.invalidArgument` when `destination` is the store's folder (its state
    ///   directory), lies inside it or is one of its files, compared by device and inode (nothing is written);
    ///   `StoreError.Code.alreadyExists` when a file is at `destination` (nothing is written);
    ///   `StoreError.Code.protectedDataUnavailable` after the store closed at a lock, `StoreError.Code.closed` after its app
    ///   closed it; `invalid-argument` for a key
    ///   that is not 32 bytes; the disk's failures (`disk-full`, `io-error`), after which nothing is at
    ///   `destination`.
    public nonisolated func export(to destination: String, encryption: ExportEncryption) async throws {
        do {
            try StateDirectoryTarget.checkOutside(
                SecureFile.folder(containing: configuration.path), target: destination, what: "the export")
            try await readers.withWritableConnection { database in
                try database.export(to: destination, encryption: encryption)
            }
        } catch {
            throw StoreError(wrapping: error)
        }
    }
}

extension StoreCoordinator {
    /// Copies the store at `configuration` into a new file without attaching it.
    ///
    /// There is no migration, no inbox merge, and nothing is written to the store, while an app (in this process
    /// or another) may have it attached. This is what `protected-store store export` runs. A connection of its
    /// own, opened with the store's recorded format and its key from `keys`, takes the copy in one read
    /// transaction. See ``export(to:encryption:)`` for how the file is written.
    ///
    /// - Parameters:
    ///   - configuration: the store.
    ///   - keys: the source of its key; the key is wiped when the copy is done.
    ///   - destination: the new file; its folder must exist.
    ///   - encryption: how the copy is encrypted.
    /// - Throws: `invalid-argument` when `destination` is the store's folder, lies inside it or is one of its
    ///   files (nothing is written); `protected-data-unavailable` when the store's class key is not held; `store-unavailable` when
    ///   there is no store; `already-exists`; the failures of SQLite and the disk, after which nothing is at
    ///   `destination`.
    public static func export(
        _ configuration: StoreConfiguration, keys: any StoreKeyProvider, to destination: String, encryption: ExportEncryption
    ) async throws {
        do {
            try StateDirectoryTarget.checkOutside(
                SecureFile.folder(containing: configuration.path), target: destination, what: "the export")
            try await StoreThread.runOnce(.reader) {
                let files = configuration.files
                let storeKey: SecureBytes
                switch try keys.lookUpStoreKey(forStoreAt: configuration.path) {
                case .available(let key): storeKey = key
                case .locked(let protectionClass): throw StoreError.protectedDataUnavailable(protectionClass)
                case .absent:
                    throw StoreError(code: .storeUnavailable, message: "there is no store to export (its key source holds no key for it)", path: files.database)
                }
                defer { storeKey.wipe() }
                var database = configuration.database
                database.format = try keyRecord(configuration, keys: keys, after: "gave the store's key").storeFormat
                database.createIfMissing = false
                let connection = try Database(path: configuration.path, key: storeKey, configuration: database)
                defer { connection.close() }
                try connection.export(to: destination, encryption: encryption)
            }
        } catch {
            throw StoreError(wrapping: error)
        }
    }
}

extension ReaderPool {
    /// Runs `body` on a connection of its own to the store that can write, on a thread of its own, then closes it.
    ///
    /// The connection is not one of the pool's read-only readers. It is for an export, which `ATTACH`es its copy
    /// (SQLite opens an attached file read-only on a read-only connection). It holds the store key as an open in
    /// progress does, so a ``close(_:)`` meanwhile wipes the key only once it is done.
    ///
    /// - Throws: `StoreError.Code.protectedDataUnavailable` once the pool is closed; the open's errors; what
    ///   `body` throws.
    func withWritableConnection<Result: Sendable>(_ body: @escaping @Sendable (Database) throws -> Result) async throws -> Result {
        let key = try borrowKey()
        let writable = { () -> Database.Configuration in
            var writable = configuration
            writable.readOnly = false
            return writable
        }()
        return try await StoreThread.runOnce(.reader) { [self] in
            defer { returnKey() }
            let database = try Database(path: path, key: key, configuration: writable)
            defer { database.close() }
            return try body(database)
        }
    }
}
