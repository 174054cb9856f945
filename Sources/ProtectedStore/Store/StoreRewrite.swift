internal import DiskModel
internal import EncryptedSQLite
internal import Logging
internal import ProtectedData
internal import SecureKeys
internal import Glibc

/// Rewriting a closed store into a format.
///
/// The format is SQLCipher 4's for `migrate`, and the same one for a compacting rewrite. The key file's recorded
/// format is changed at one commit point, so that a power cut at any step leaves the old store with the old key
/// file, or the new store with the new key file (<doc:/SecureKeys/KeyFileFormats>, *Rewriting a store*).
///
/// The steps, each synced before the next:
/// 1. the new key file image (same store key and identifier, the target format recorded) is written to
///    `<store>.key.rewrite`: while it exists, the rewrite is not committed;
/// 2. the store's log is checkpointed away (`journal_mode = DELETE`), and `sqlcipher_export` copies the store
///    into `<store>.rewrite-tmp`, which is synced, checked (`integrity_check` in the target format) and renamed
///    `<store>.rewrite`;
/// 3. **commit**: `<store>.key.rewrite` is renamed over `<store>.key`;
/// 4. `<store>.rewrite` is renamed over the store.
///
/// The rule at the next attach (``recover(_:)``): `<store>.key.rewrite` present — not committed: the copies
/// are removed (the rewrite first, the key image last, so that a cut during the undo leaves it still
/// undoing); absent while `<store>.rewrite` is present — committed: the rewrite is renamed over the store.
/// The store file is never changed before the commit, and only replaced, whole, after it.
enum StoreRewrite {
    /// What a rewrite did.
    enum Outcome: Sendable, Equatable {
        /// The store is now in the format (it was in `from`).
        case rewritten(from: StoreFormat)
    }

    /// Rewrites the closed store of `files` into `target`.
    ///
    /// - Parameters:
    ///   - files: the store's files.
    ///   - storeKey: its key (unchanged by the rewrite).
    ///   - newKeyFile: its key file as it must read afterwards: `target` recorded, the same store identifier.
    /// - Throws: `StoreError.Code.busy` when a connection (of this process or another) has the store open;
    ///   `StoreError.Code.storeUnavailable` when the linked SQLCipher cannot write `target`; the failures of
    ///   SQLite and the file system — the store is then as it was, or (after the commit) rewritten, and the
    ///   next attach finishes what was left.
    static func rewrite(
        _ files: StoreFiles, storeKey: SecureBytes, newKeyFile: StoreKeyFile, to target: StoreFormat, in fileSystem: FileSystem
    ) throws -> Outcome {
        try recover(files, in: fileSystem)
        guard !Database.isOpenByAnyConnection(files.database) else {
            throw StoreError(
                code: .busy, message: "the store is open (close it, and every app using it, before it is rewritten)",
                path: files.database)
        }
        let oldKeyFile = try StoreKeyFile.load(from: files.key)
        guard newKeyFile.storeID == oldKeyFile.storeID, newKeyFile.storeFormat == target else {
            throw StoreError(code: .misuse, message: "the new key file is not this store's, in \(target)", path: files.keyRewrite)
        }
        let source = oldKeyFile.storeFormat
        // A format the linked SQLCipher cannot write is refused before any file is touched.
        guard let library = Database.linkedSQLCipher else {
            throw StoreError(code: .notSQLCipher, message: "the linked SQLite library is not SQLCipher", path: files.database)
        }
        _ = try CipherSettings(format: target, library: library)
        let logger = LogSubsystem.store.makeLogger()
        // 1. The key file to be: while it is there, nothing is committed.
        try SecureFile.writeAtomically(newKeyFile.bytes, to: files.keyRewrite, replacing: false, in: fileSystem)
        do {
            // 2. The copy, from the store with its log checkpointed away: after the commit, the store file
            // is replaced, and a log left beside it would be replayed into the new one.
            var configuration = Database.Configuration()
            configuration.fileSystem = fileSystem
            configuration.format = source
            configuration.createIfMissing = false
            let database = try Database(path: files.database, key: storeKey, configuration: configuration)
            do {
                try database.execute("PRAGMA journal_mode = DELETE")
                try database.writeCopy(toNewFileAt: files.rewriteTemporary, keying: .raw(storeKey, salt: nil), format: target)
                database.close()
            } catch {
                database.close()
                throw error
            }
            // The log was checkpointed into the store by the switch to DELETE: what is left of it is
            // redundant — and must go, durably, before the commit, or SQLite would replay it into the rewrite
            // the first time the new store opens in WAL mode. SQLite ignores a failure to remove it; here it
            // is an error.
            try DiskIO.unlink(files.writeAheadLog, in: fileSystem)
            try DiskIO.unlink(files.sharedMemory, in: fileSystem)
            try check(files.rewriteTemporary, storeKey: storeKey, format: target, in: fileSystem)
            try DiskIO.rename(files.rewriteTemporary, to: files.rewrite, in: fileSystem)
            try DiskIO.syncDirectory(SecureFile.folder(containing: files.rewrite), in: fileSystem)
        } catch {
            // Not committed: the copies go, the store and its key file were never touched. A cleanup that fails
            // too is finished by the next attach.
            try? undo(files, in: fileSystem)
            throw error
        }
        // 3. The commit point.
        try DiskIO.rename(files.keyRewrite, to: files.key, in: fileSystem)
        try DiskIO.syncDirectory(SecureFile.folder(containing: files.key), in: fileSystem)
        logger.debug("store rewrite committed", metadata: ["store": "\(files.database)", "from": "\(source.name)", "to": "\(target.name)"])
        // 4. The new store in place (or, if this fails, at the next attach).
        try finish(files, in: fileSystem)
        return .rewritten(from: source)
    }

    /// Finishes or undoes a rewrite a crash (or a failure) interrupted.
    ///
    /// It runs at every attach, before the key file's format is read, and before a rewrite starts.
    ///
    /// - Throws: the file system's failures (nothing is then lost: the rule is the same at the next try);
    ///   `StoreError.Code.storeUnavailable` when a committed rewrite finds a write-ahead log beside the old
    ///   store (never replayed into the new one: both are left as they are).
    static func recover(_ files: StoreFiles, in fileSystem: FileSystem) throws {
        if SecureFile.exists(files.keyRewrite) {
            LogSubsystem.store.makeLogger().debug("undoing an uncommitted store rewrite", metadata: ["store": "\(files.database)"])
            try undo(files, in: fileSystem)
        } else if SecureFile.exists(files.rewrite) {
            LogSubsystem.store.makeLogger().debug("finishing a committed store rewrite", metadata: ["store": "\(files.database)"])
            try finish(files, in: fileSystem)
        } else if SecureFile.exists(files.rewriteTemporary) {
            // Only an undo cut short between its removals leaves this alone; it never held the only copy.
            try removeTemporary(files, in: fileSystem)
        }
    }

    /// The undo of an uncommitted rewrite.
    ///
    /// It removes the copy first, the new key file image last.
    private static func undo(_ files: StoreFiles, in fileSystem: FileSystem) throws {
        try removeTemporary(files, in: fileSystem)
        try DiskIO.unlink(files.rewrite, in: fileSystem)
        try DiskIO.syncDirectory(SecureFile.folder(containing: files.rewrite), in: fileSystem)
        try DiskIO.unlink(files.keyRewrite, in: fileSystem)
        try DiskIO.syncDirectory(SecureFile.folder(containing: files.keyRewrite), in: fileSystem)
    }

    private static func removeTemporary(_ files: StoreFiles, in fileSystem: FileSystem) throws {
        try DiskIO.unlink(files.rewriteTemporary + "-journal", in: fileSystem)
        try DiskIO.unlink(files.rewriteTemporary, in: fileSystem)
    }

    /// After the commit, the rewrite replaces the store.
    private static func finish(_ files: StoreFiles, in fileSystem: FileSystem) throws {
        if SecureFile.exists(files.writeAheadLog) {
            throw StoreError(
                code: .storeUnavailable,
                message: "a committed rewrite of the store (\(files.rewrite)) waits to replace it, but a write-ahead log is beside the old store: both are left as they are",
                path: files.writeAheadLog)
        }
        try DiskIO.unlink(files.sharedMemory, in: fileSystem)
        try DiskIO.rename(files.rewrite, to: files.database, in: fileSystem)
        try DiskIO.syncDirectory(SecureFile.folder(containing: files.database), in: fileSystem)
    }

    /// Opens the copy as the store will be opened, and reads every page (`integrity_check`).
    private static func check(_ path: String, storeKey: SecureBytes, format: StoreFormat, in fileSystem: FileSystem) throws {
        var configuration = Database.Configuration()
        configuration.fileSystem = fileSystem
        configuration.format = format
        configuration.usesWAL = false
        configuration.readOnly = true
        configuration.createIfMissing = false
        let copy = try Database(path: path, key: storeKey, configuration: configuration)
        defer { copy.close() }
        let findings = try copy.integrityCheck()
        guard findings == ["ok"] else {
            throw StoreError(
                code: .storeDamaged, message: "the rewrite fails integrity_check: \(findings.prefix(3).joined(separator: "; "))",
                path: path)
        }
    }
}
