internal import DiskModel
internal import EncryptedSQLite
internal import Foundation
internal import Logging
public import ProtectedData
public import SecureKeys
internal import Glibc
internal import SystemPackage

/// What a backup wrote.
public struct BackupSummary: Sendable, Hashable {
    /// The backup file.
    public let path: String
    /// Its length in bytes.
    public let byteCount: UInt64
    /// The format of the database inside it.
    public let storeFormat: StoreFormat
    /// The recovery key it is sealed to (`RecoveryKey.fingerprint`).
    ///
    /// Only that key's phrase opens it.
    public let recoveryKeyFingerprint: String
}

extension StoreCoordinator {
    /// Writes an encrypted, authenticated copy of the store to a single file, while the app runs.
    ///
    /// Only the recovery phrase opens the file.
    ///
    /// The copy is read from one snapshot on a connection of its own, on a thread of its own: writes go on
    /// while it runs (a WAL reader never blocks the writer), and transactions the write-ahead log has not
    /// checkpointed yet are in it. It goes into a new SQLCipher file in the store's format (the one its key
    /// source recorded at the attach: no key file is read, whatever keeps the key), keyed with a key
    /// derived from a random data key of this backup; that copy passes `PRAGMA integrity_check` (every page
    /// read, so every page's HMAC checked) before the backup file is assembled: a header (the recovery key's
    /// Argon2id parameters and public key, the data key sealed to it), the database, and a BLAKE2b tag over
    /// both (<doc:/SecureKeys/KeyFileFormats>, "Backup file"). The file is written to a temporary beside `path`, synced, and put
    /// in place with `link` (or `rename`, when replacing) and a sync of its folder: a crash leaves no backup
    /// or a whole one. The phrase is never needed: the data key is sealed to the public key.
    ///
    /// - Parameters:
    ///   - path: the backup file.
    ///   - recoveryKey: the recovery key to seal it to (`RecoveryKey.load(from:)`, the store's
    ///     `<store>.recovery-key`).
    ///   - replacingExisting: whether a file at `path` may be replaced (atomically); otherwise it is
    ///     `already-exists`.
    /// - Returns: what was written.
    /// - Throws: `StoreError` — `invalid-argument` when `path` is the store's folder (its state directory),
    ///   lies inside it or is one of its files, compared by device and inode (nothing is written);
    ///   `already-exists`, `protected-data-unavailable` after the store closed,
    ///   `store-damaged` when the copy fails its integrity check, `disk-full` or `io-error` naming the file.
    ///   Nothing is left at `path` then, and the store is not changed.
    public nonisolated func backup(
        to path: String, recoveryKey: RecoveryKey, replacingExisting: Bool = false
    ) async throws -> BackupSummary {
        let storeKey = try readers.copyOfStoreKey()
        let configuration = configuration
        let format = readers.storeFormat
        do {
            return try await StoreThread.runOnce(.reader) {
                defer { storeKey.wipe() }
                return try StoreBackup.write(
                    store: configuration, format: format, storeKey: storeKey, to: path, recoveryKey: recoveryKey,
                    replacingExisting: replacingExisting)
            }
        } catch {
            throw StoreError(wrapping: error)
        }
    }
}

/// What a restore did.
public struct RestoreSummary: Sendable, Hashable {
    /// The restored store.
    public let storePath: String
    /// The folder the store that was there before was kept in (`<store>.replaced-<time>-<id>/`), or `nil` when
    /// there was none.
    public let keptAside: String?
    /// The recovery key the backup was sealed to, now written beside the restored store.
    ///
    /// It is written so that the store's next backups are sealed to the same phrase. It is `nil` if that file
    /// could not be written. The restore still succeeded; create the file again from the phrase's backup, or
    /// a new recovery key.
    public let recoveryKeyPath: String?
}

/// Backing up and restoring a store.
///
/// The file format is `BackupHeader`'s (<doc:/SecureKeys/KeyFileFormats>, "Backup file").
public enum StoreBackup: Sendable {
    /// How much of the file is read or written at a time.
    static let chunkLength = 1 << 20

    /// Restores a backup into a new store at `configuration.path`, keyed for this device.
    ///
    /// In order, and before anything is replaced: the header is checked (`backup-damaged`,
    /// `unsupported-backup-format`); the phrase derives the recovery key (Argon2id with the header's salt and
    /// cost) and must be the one the backup was sealed to (`wrong-recovery-phrase`); the data key is opened;
    /// the database is copied to a staging file beside the store while its tag is computed over every byte,
    /// and the tag must match (`backup-damaged`: SQLite never reads a byte that was not authenticated); the
    /// copy must pass `PRAGMA integrity_check`; the key source makes the new store's key for a staged store
    /// beside the target (`<store>.restoring-…-store`; the devices write a key file wrapped by the class key of
    /// `configuration.protectionClass`), the staging copy is exported again
    /// under it (a second `sqlcipher_export`, not `sqlite3_rekey`, which on SQLCipher 3.4.1 reports success
    /// over failed writes), and that copy passes `PRAGMA integrity_check` with the new key. Only then is
    /// anything at the store's path touched: an existing store (with `replacingExisting`) is kept aside —
    /// every one of its files hard-linked into `<store>.replaced-<time>-<id>/`, that folder synced, then
    /// unlinked from its place; a key its source keeps elsewhere than a key file is moved aside through the
    /// source (`StoreKeyProvider.moveStoreKey(from:to:)`, to `<store>.replaced-<time>-<id>/<name>`) — then the
    /// key is moved into place through the source (`moveStoreKey(from:to:)`: the key file renamed, for the
    /// devices) and the store renamed into place, the folder synced. The recovery key is written beside it.
    /// The store's key is never read from or written to a key file behind the source's back.
    ///
    /// A restore that fails leaves the target as it found it: the staging files and the new key file are
    /// removed (a source that keeps keys elsewhere keeps the key it made for the staged store, which encrypts
    /// nothing that was put in place), and a failure while the old store is moved aside or the new one put
    /// into place puts the old one back. A crash at any point leaves the old store whole (in place, or complete in its folder
    /// aside), and either no restored store or a whole one; a crash between the two renames leaves a key file
    /// without its store, which the next attach reports as `store-unavailable` (never re-created empty), and
    /// which a new restore with `replacingExisting` puts aside. The store must not be attached while it runs.
    ///
    /// - Parameters:
    ///   - backupPath: the backup file.
    ///   - phrase: the recovery phrase, as the user typed it (`RecoveryPhrase(typed:)`).
    ///   - configuration: the store to restore into; its protection class is the new store's.
    ///   - keys: the key source that makes the new store's key (it must hold that class's key now) and moves
    ///     it into place.
    ///   - replacingExisting: whether a store already at that path may be replaced (kept aside, never deleted).
    /// - Returns: where the store is, and where the old one was kept.
    /// - Throws: `StoreError` — `restore-target-exists` (nothing changed; also when only `keys` holds a key
    ///   for the target), `wrong-recovery-phrase`, `backup-damaged`, `unsupported-backup-format`,
    ///   `protected-data-unavailable`, `key-source-unsupported` when `keys` keeps keys elsewhere than key files
    ///   and does not implement `moveStoreKey(from:to:)` (the target is left as it was), `disk-full`, `io-error`.
    public static func restore(
        from backupPath: String, phrase: RecoveryPhrase, into configuration: StoreConfiguration,
        keys: any StoreKeyProvider, replacingExisting: Bool = false
    ) async throws -> RestoreSummary {
        do {
            return try await StoreThread.runOnce(.writer) {
                try restoreNow(
                    from: backupPath, phrase: phrase, into: configuration, keys: keys, replacingExisting: replacingExisting)
            }
        } catch {
            throw StoreError(wrapping: error)
        }
    }

    /// The files of the store at `storePath` a restore must not overwrite, and moves aside.
    ///
    /// They are every file of `StoreFiles` and the recovery key file.
    static func files(ofStoreAt storePath: String) -> [String] {
        let files = StoreFiles(database: storePath)
        return [files.database, files.writeAheadLog, files.sharedMemory, files.database + "-journal"]
            + [files.key, files.inbox, files.inboxKey, files.inboxDamaged, files.inboxSequence, files.creationMarker]
            + [RecoveryKey.path(forStoreAt: storePath)]
    }

    // MARK: Backup

    /// Writes the backup of the attached store `store`.
    ///
    /// The store was opened in `format` (what its key source records) with `storeKey`. The store's key file is
    /// never read, as the key and the format come from the attach.
    static func write(
        store: StoreConfiguration, format: StoreFormat, storeKey: SecureBytes, to path: String,
        recoveryKey: RecoveryKey, replacingExisting: Bool
    ) throws -> BackupSummary {
        let fileSystem = store.fileSystem
        try StateDirectoryTarget.checkOutside(SecureFile.folder(containing: store.path), target: path, what: "the backup")
        if !replacingExisting && SecureFile.exists(path) { throw SecureKeysError.alreadyExists(path: path) }
        let folder = SecureFile.folder(containing: path)
        let suffix = randomSuffix()
        let copyPath = path + ".copy-" + suffix
        let temporary = path + ".tmp-" + suffix
        var committed = false
        defer {
            try? DiskIO.unlink(copyPath + "-journal", in: fileSystem)
            try? DiskIO.unlink(copyPath, in: fileSystem)
            if !committed { try? DiskIO.unlink(temporary, in: fileSystem) }
        }
        let dataKey = try SecureBytes.random(count: BackupHeader.dataKeyLength)
        defer { dataKey.wipe() }
        let databaseKey = try BackupHeader.databaseKey(from: dataKey)
        defer { databaseKey.wipe() }
        // The copy: a connection of its own on the store, one snapshot, exported under the backup's key.
        do {
            var source = store.database
            source.format = format
            // The attached copy is opened with the main connection's flags, so it needs SQLITE_OPEN_CREATE; the
            // store itself exists (it is attached), and is checked for all the same.
            guard SecureFile.exists(store.path) else {
                throw StoreError(code: .storeUnavailable, message: "the store file is missing", path: store.path)
            }
            source.createIfMissing = true
            source.checksWriteAheadLog = false
            let database = try Database(path: store.path, key: storeKey, configuration: source)
            defer { database.close() }
            try database.exportSnapshot(to: copyPath, key: databaseKey, format: format)
        }
        try checkIntegrity(ofCopyAt: copyPath, key: databaseKey, format: format, in: fileSystem) { findings in
            StoreError(
                code: .storeDamaged,
                message: "the backup's copy of the store fails its integrity check (\(findings)); no backup was written",
                path: store.path)
        }
        // The file: header ‖ database ‖ tag, into a temporary, synced, then put in place.
        let descriptor: FileDescriptor
        do throws(Errno) { descriptor = try systemCall { try FileDescriptor.open(FilePath(copyPath), .readOnly, options: [.closeOnExec, .noFollow]) } } catch {
            throw SecureKeysError.io("cannot open", path: copyPath, errno: error)
        }
        defer { try? descriptor.close() }
        let databaseLength: UInt64
        do throws(Errno) { databaseLength = UInt64(try descriptor.stat().size) } catch {
            throw SecureKeysError.io("cannot stat", path: copyPath, errno: error)
        }
        let header = try BackupHeader.make(
            recoveryKey: recoveryKey, storeFormat: format, databaseLength: databaseLength, dataKey: dataKey)
        let macKey = try BackupHeader.macKey(from: dataKey)
        defer { macKey.wipe() }
        let authenticator = try BackupAuthenticator(key: macKey)
        do {
            let file = try DiskIO.open(temporary, flags: O_WRONLY | O_CREAT | O_EXCL, in: fileSystem)
            defer { file.close() }
            try file.write(header.bytes)
            header.bytes.withUnsafeBytes { authenticator.update($0) }
            var offset = 0
            while offset < Int(databaseLength) {
                let chunk = try SecureFile.readAll(
                    from: descriptor, offset: offset, count: min(chunkLength, Int(databaseLength) - offset), path: copyPath)
                chunk.withUnsafeBytes { authenticator.update($0) }
                try file.write(chunk)
                offset += chunk.count
            }
            try file.write(authenticator.finish())
            try file.sync()
        }
        if replacingExisting {
            try DiskIO.rename(temporary, to: path, in: fileSystem)
        } else {
            // link(2) refuses to replace a file that appeared meanwhile.
            try DiskIO.link(temporary, to: path, in: fileSystem)
            try? DiskIO.unlink(temporary, in: fileSystem)
        }
        committed = true
        try DiskIO.syncDirectory(folder, purpose: replacingExisting ? .data : .newFileEntry, in: fileSystem)
        LogSubsystem.store.makeLogger().debug(
            "backup written", metadata: ["store": "\(store.path)", "backup": "\(path)", "bytes": "\(header.fileLength)"])
        return BackupSummary(
            path: path, byteCount: header.fileLength, storeFormat: format, recoveryKeyFingerprint: recoveryKey.fingerprint)
    }

    // MARK: Restore

    static func restoreNow(
        from backupPath: String, phrase: RecoveryPhrase, into configuration: StoreConfiguration,
        keys: any StoreKeyProvider, replacingExisting: Bool
    ) throws -> RestoreSummary {
        let storePath = configuration.path
        let fileSystem = configuration.fileSystem
        let existing = files(ofStoreAt: storePath).filter(fileExists)
        // A key the source keeps elsewhere than a key file beside the store (a keychain, memory) is a store
        // there too: it is kept aside through the source, with the store's files.
        let keyHeldElsewhere = try !existing.contains(StoreFiles(database: storePath).key)
            && keys.storeKeyRecord(forStoreAt: storePath) != nil
        if (!existing.isEmpty || keyHeldElsewhere) && !replacingExisting {
            let found = existing + (keyHeldElsewhere ? ["its key in \(type(of: keys))"] : [])
            throw StoreError(
                code: .restoreTargetExists,
                message: "a store is already at \(storePath) (\(found.joined(separator: ", "))): a restore never replaces it silently; nothing was changed. Restore with --replace to keep it aside, or into another path",
                path: storePath)
        }
        // The backup, authenticated before any byte of it reaches SQLite.
        let descriptor: FileDescriptor
        do throws(Errno) {
            descriptor = try systemCall { try FileDescriptor.open(FilePath(backupPath), .readOnly, options: [.closeOnExec, .noFollow, .nonBlocking]) }
        } catch {
            throw SecureKeysError.io("cannot open the backup", path: backupPath, errno: error)
        }
        defer { try? descriptor.close() }
        let info: Stat
        do throws(Errno) { info = try descriptor.stat() } catch {
            throw SecureKeysError.io("cannot stat", path: backupPath, errno: error)
        }
        guard info.type == .regular else {
            throw SecureKeysError.io("not a regular file:", path: backupPath, errno: EISDIR)
        }
        let fileLength = UInt64(info.size)
        let headerBytes = try SecureFile.readAll(
            from: descriptor, offset: 0, count: min(BackupHeader.length, Int(fileLength)), path: backupPath)
        let header = try BackupHeader(bytes: headerBytes, fileLength: fileLength, path: backupPath)
        let privateKey = try header.recoveryKey.privateKey(for: phrase)
        let dataKey: SecureBytes
        do {
            defer { privateKey.wipe() }
            dataKey = try header.openDataKey(privateKey: privateKey, path: backupPath)
        }
        defer { dataKey.wipe() }
        let databaseKey = try BackupHeader.databaseKey(from: dataKey)
        defer { databaseKey.wipe() }
        let macKey = try BackupHeader.macKey(from: dataKey)
        defer { macKey.wipe() }

        let folder = SecureFile.folder(containing: storePath)
        removeStagingLeftovers(of: storePath, in: fileSystem)
        let staging = storePath + ".restoring-" + randomSuffix()
        var renamed = false
        // The backup's copy (under the backup's key) is never put in place: removed however the restore ends.
        defer {
            try? DiskIO.unlink(staging + "-journal", in: fileSystem)
            try? DiskIO.unlink(staging, in: fileSystem)
        }
        // The copy, authenticated on the way.
        let authenticator = try BackupAuthenticator(key: macKey)
        header.bytes.withUnsafeBytes { authenticator.update($0) }
        do {
            let file = try DiskIO.open(staging, flags: O_WRONLY | O_CREAT | O_EXCL, in: fileSystem)
            defer { file.close() }
            var offset = BackupHeader.length
            let end = BackupHeader.length + Int(header.databaseLength)
            while offset < end {
                let chunk = try SecureFile.readAll(
                    from: descriptor, offset: offset, count: min(chunkLength, end - offset), path: backupPath)
                chunk.withUnsafeBytes { authenticator.update($0) }
                try file.write(chunk)
                offset += chunk.count
            }
            let tag = try SecureFile.readAll(from: descriptor, offset: end, count: BackupHeader.tagLength, path: backupPath)
            guard KeyDerivation.constantTimeEquals(authenticator.finish(), tag) else {
                throw SecureKeysError(
                    code: .backupDamaged,
                    message: "the backup is damaged: its authentication tag does not match its contents (altered); nothing was restored",
                    path: backupPath)
            }
            try file.sync()
        }
        try checkIntegrity(ofCopyAt: staging, key: databaseKey, format: header.storeFormat, in: fileSystem) { findings in
            StoreError(
                code: .backupDamaged,
                message: "the backup is damaged: its database fails its integrity check (\(findings)); nothing was restored",
                path: backupPath)
        }

        // The new store is made complete under staging names — its key file included — before anything at the
        // store's path is touched: a failure up to the commit leaves the target as it was.
        let rekeyed = staging + "-store"
        let stagedFiles = StoreFiles(database: rekeyed)
        defer {
            if !renamed {
                try? DiskIO.unlink(rekeyed + "-journal", in: fileSystem)
                try? DiskIO.unlink(rekeyed, in: fileSystem)
                // The key the device made for this restore (its name is this restore's alone), which encrypts
                // nothing that was put in place; also when its creation failed after the file was written.
                try? DiskIO.unlink(stagedFiles.key, in: fileSystem)
            }
        }
        let storeKey = try keys.createStoreKey(forStoreAt: rekeyed, protectionClass: configuration.protectionClass)
        defer { storeKey.wipe() }
        // Re-encrypted under the new store key by a second export, not `sqlite3_rekey`: SQLCipher 3.4.1's rekey
        // returns SQLITE_OK even when a page write or its commit failed (the fault sweep found a restore that
        // said done over a store that did not open). The export reports every failure, and the new file is
        // integrity-checked with the store key before it is renamed into place.
        do {
            var settings = Database.Configuration()
            settings.fileSystem = fileSystem
            settings.format = header.storeFormat
            settings.usesWAL = false
            settings.createIfMissing = true  // the attached copy is created with the main connection's flags
            settings.checksWriteAheadLog = false
            let database = try Database(path: staging, key: databaseKey, configuration: settings)
            defer { database.close() }
            try database.exportSnapshot(to: rekeyed, key: storeKey, format: header.storeFormat)
        }
        try checkIntegrity(ofCopyAt: rekeyed, key: storeKey, format: header.storeFormat, in: fileSystem) { findings in
            StoreError(
                code: .storeUnavailable,
                message: "the restored store, written under its new key, fails its integrity check (\(findings)): the disk failed while it was written; nothing was put in place",
                path: rekeyed)
        }

        // The commit: the old store kept aside, then the key (through its source) and the store moved into
        // place. A failure in it puts back what was moved (as far as the disk and the source let it), so the
        // target is as it was found.
        let keptAside = existing.isEmpty && !keyHeldElsewhere ? nil : asideFolder(forStoreAt: storePath)
        let keyAside = keptAside.map { $0 + "/" + (storePath as NSString).lastPathComponent }
        var oldKeyAside = false
        var keyInPlace = false
        var storeInPlace = false
        do {
            if let keptAside { try keepAside(existing, in: keptAside, ofStoreAt: storePath, fileSystem: fileSystem) }
            if keyHeldElsewhere, let keyAside {
                try keys.moveStoreKey(from: storePath, to: keyAside)
                oldKeyAside = true
            }
            try keys.moveStoreKey(from: rekeyed, to: storePath)
            keyInPlace = true
            try DiskIO.rename(rekeyed, to: storePath, in: fileSystem)
            storeInPlace = true
            try DiskIO.syncDirectory(folder, in: fileSystem)
            renamed = true
        } catch {
            if storeInPlace, (try? DiskIO.rename(storePath, to: rekeyed, in: fileSystem)) == nil {
                renamed = true  // the restored store stays, whole, with its key: nothing of it is removed
            } else if keyInPlace {
                try? keys.moveStoreKey(from: storePath, to: rekeyed)
            }
            if oldKeyAside, !renamed, let keyAside { try? keys.moveStoreKey(from: keyAside, to: storePath) }
            if let keptAside, !renamed { putBack(existing, from: keptAside, ofStoreAt: storePath, in: fileSystem) }
            throw error
        }
        var recoveryKeyPath: String? = RecoveryKey.path(forStoreAt: storePath)
        do {
            try header.recoveryKey.write(to: recoveryKeyPath!, in: fileSystem)
        } catch {
            LogSubsystem.store.makeLogger().notice(
                "restored, but the recovery key file was not written", metadata: ["store": "\(storePath)", "error": "\(error)"])
            recoveryKeyPath = nil
        }
        LogSubsystem.store.makeLogger().debug(
            "store restored", metadata: ["store": "\(storePath)", "backup": "\(backupPath)", "kept-aside": "\(keptAside ?? "-")"])
        return RestoreSummary(storePath: storePath, keptAside: keptAside, recoveryKeyPath: recoveryKeyPath)
    }

    /// Opens the copy at `path` and runs `PRAGMA integrity_check`, which reads every page and so checks every
    /// page's HMAC (SQLCipher 3.4 has no `cipher_integrity_check`).
    private static func checkIntegrity(
        ofCopyAt path: String, key: SecureBytes, format: StoreFormat, in fileSystem: FileSystem, failure: (String) -> StoreError
    ) throws {
        var settings = Database.Configuration()
        settings.fileSystem = fileSystem
        settings.format = format
        settings.usesWAL = false
        settings.createIfMissing = false
        settings.checksWriteAheadLog = false
        settings.readOnly = true
        let findings: [String]
        do {
            let database = try Database(path: path, key: key, configuration: settings)
            defer { database.close() }
            findings = try database.integrityCheck()
        } catch let error as StoreError where [.wrongKey, .storeDamaged, .sqliteError].contains(error.code) {
            var failed = failure(error.message)
            failed.cause = error
            throw failed
        }
        guard findings == ["ok"] else { throw failure(findings.prefix(3).joined(separator: "; ")) }
    }

    /// Moves every one of `existing` into a new folder beside the store.
    ///
    /// It hard-links them into the folder, syncs it, then unlinks them from their place (the database first)
    /// and syncs the store's folder. At every instant the old store is whole in its place, in the folder, or
    /// both.
    private static func keepAside(_ existing: [String], in aside: String, ofStoreAt storePath: String, fileSystem: FileSystem) throws {
        try DiskIO.makeDirectory(aside, in: fileSystem)
        try DiskIO.syncDirectory(SecureFile.folder(containing: storePath), purpose: .newFileEntry, in: fileSystem)
        for file in existing {
            try DiskIO.link(file, to: aside + "/" + (file as NSString).lastPathComponent, in: fileSystem)
        }
        try DiskIO.syncDirectory(aside, purpose: .newFileEntry, in: fileSystem)
        for file in existing { try DiskIO.unlink(file, in: fileSystem) }
        try DiskIO.syncDirectory(SecureFile.folder(containing: storePath), in: fileSystem)
    }

    /// The folder a replaced store is kept in, `<store>.replaced-<time>-<id>`.
    private static func asideFolder(forStoreAt storePath: String) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return storePath + ".replaced-" + formatter.string(from: Date()) + "-" + randomSuffix()
    }

    /// Undoes ``keepAside(_:in:ofStoreAt:fileSystem:)`` (whole or part-done) after a restore failed at its commit.
    ///
    /// It links every file of the old store that is not in its place back into it, syncs the store's folder,
    /// then removes the folder aside. This is best effort. Where the disk refuses a step, the old store stays
    /// whole in the folder aside, which is then kept.
    private static func putBack(_ existing: [String], from aside: String, ofStoreAt storePath: String, in fileSystem: FileSystem) {
        let folder = SecureFile.folder(containing: storePath)
        for file in existing where !fileExists(file) {
            guard (try? DiskIO.link(aside + "/" + (file as NSString).lastPathComponent, to: file, in: fileSystem)) != nil else { return }
        }
        guard (try? DiskIO.syncDirectory(folder, in: fileSystem)) != nil else { return }
        for file in existing { try? DiskIO.unlink(aside + "/" + (file as NSString).lastPathComponent, in: fileSystem) }
        if (try? DiskIO.removeDirectory(aside, in: fileSystem)) != nil { try? DiskIO.syncDirectory(folder, in: fileSystem) }
    }

    /// Removes the staging copies an interrupted restore left (`<store>.restoring-*`).
    ///
    /// They are encrypted copies of a backup, never a store anyone used.
    private static func removeStagingLeftovers(of storePath: String, in fileSystem: FileSystem) {
        let folder = SecureFile.folder(containing: storePath)
        let prefix = (storePath as NSString).lastPathComponent + ".restoring-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else { return }
        for name in names where name.hasPrefix(prefix) { try? DiskIO.unlink(folder + "/" + name, in: fileSystem) }
    }

    private static func fileExists(_ path: String) -> Bool {
        (try? Stat(FilePath(path), followTargetSymlink: false)) != nil
    }

    private static func randomSuffix() -> String {
        SystemRandom().bytes(count: 6).map { String(format: "%02x", $0) }.joined()
    }
}
