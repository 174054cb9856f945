internal import EncryptedSQLite
internal import Logging
internal import ProtectedData
internal import SecureKeys

/// Creating a store, and telling an interrupted creation from a lost store.
///
/// Creation is two steps, the key (made by the key source) and then the store, so a crash can fall between
/// them. The creation marker (``StoreCreationMarker``) describes one creation in progress: written when a
/// creation starts, told which key the creation made (its identifier, from the source's
/// `StoreKeyProvider/storeKeyRecord(forStoreAt:)`) as soon as it exists, removed once the store file has its
/// first page on disk. A key without its store is finished only when the marker names that very key — or, for
/// a crash in the instant between the key's creation and the marker naming it, when the marker names none and
/// nothing shows that the key's store ever existed. The library learns of the key only through its source: it never
/// reads or writes a key file.
///
/// Only the first-stage marker is made durable at once (its folder synced) before the key is made; the second
/// stage, the removal and the inbox key file's name become durable with the folder syncs SQLite makes when it
/// first syncs the store's rollback journal and its log. A crash before those leaves the first-stage marker, or
/// a marker beside a store that has its first page: keys/README.md, "The creation, step by step", goes through
/// every crash point.
extension StoreCoordinator {
    /// Starts the creation of a new store and makes its key.
    ///
    /// Nothing is written where a store file or its log exists without a key (`store-exists-without-key`):
    /// that is someone's data, never given a new key, and not a creation. Otherwise the marker is written, the
    /// key made through `keys`, and the marker told the new key's identifier, which `keys` records. A creation
    /// that ends without a key removes its marker; one whose marker cannot be told the new key's identifier
    /// fails with that write's error, and the next attach finishes it.
    ///
    /// - Returns: the new store key, and what `keys` records of it.
    /// - Throws: `store-exists-without-key`; `key-source-inconsistent` when `keys` made a key but records none;
    ///   what `keys` or the marker's writes throw.
    static func createStoreKey(
        _ configuration: StoreConfiguration, keys: any StoreKeyProvider
    ) throws -> (key: SecureBytes, record: StoreKeyRecord) {
        let files = configuration.files
        for existing in [files.database, files.writeAheadLog] where SecureFile.exists(existing) {
            throw SecureKeysError.storeExistsWithoutKey(storePath: existing)
        }
        try StoreCreationMarker(stage: .makingKey).write(to: files.creationMarker, in: configuration.fileSystem)
        let storeKey: SecureBytes
        do {
            storeKey = try keys.createStoreKey(forStoreAt: configuration.path, protectionClass: configuration.protectionClass)
        } catch {
            // Without a key this creation made nothing, and its marker must not outlive it. With one (made
            // before the failure was reported, or by a creation beside this one) — or when the source cannot
            // tell — the marker stays as it is: it names no key, so it never finishes a creation on its own.
            let holdsNoKey: Bool
            do {
                holdsNoKey = try keys.storeKeyRecord(forStoreAt: configuration.path) == nil
            } catch {
                holdsNoKey = false
            }
            if holdsNoKey {
                do {
                    try StoreCreationMarker.remove(at: files.creationMarker, in: configuration.fileSystem)
                } catch let removal {
                    // Harmless if left: a creation marker without a key is replaced by the next creation.
                    LogSubsystem.store.makeLogger().debug(
                        "creation marker not removed", metadata: ["marker": "\(files.creationMarker)", "error": "\(removal)"])
                }
            }
            throw error
        }
        let record: StoreKeyRecord
        do {
            record = try keyRecord(configuration, keys: keys, after: "made a key")
            // The folder is not synced for this stage: a crash before its next sync (SQLite's, when it creates
            // the store's journal) leaves the first-stage marker, durable, which finishes this same creation.
            try StoreCreationMarker(stage: .keyMade(storeID: record.storeID)).write(to: files.creationMarker, syncingFolder: false, in: configuration.fileSystem)
        } catch {
            // Said, not swallowed: the disk that refused the marker (full, failing) would refuse the store next,
            // and the error must name it. The key stays beside a stage-1 marker, which the next attach takes
            // for this interrupted creation and finishes.
            storeKey.wipe()
            throw error
        }
        return (storeKey, record)
    }

    /// Ends the creation of the store `configuration` describes, if one was in progress, and opens its inbox key pair.
    ///
    /// Called once the store is open, so its file has its first page on disk (a new store's switch to WAL
    /// synced it): the creation marker is removed, and the inbox key file is made at a store's first attach
    /// (`LockedInbox/openKeyPair(storeKey:syncingFolder:)`). Both are changes of the folder's entries. When the
    /// store has no log yet and its commits are synced (`synchronous`, `FULL`), they are not synced here: the
    /// migrations' first commit creates the log, and SQLite's first sync of a new log syncs its folder too.
    ///
    /// - Returns: the inbox key pair, and the folder the caller must sync when the migrations commit nothing
    ///   (`nil` when no entry change waits for a sync).
    /// - Throws: what the marker's removal and the inbox key file throw.
    static func finishCreation(
        _ configuration: StoreConfiguration, storeKey: SecureBytes, synchronous: Database.Configuration.Synchronous
    ) throws -> (publicKey: [UInt8], privateKey: SecureBytes, unsyncedFolder: String?) {
        let files = configuration.files
        let logSyncsFolder = synchronous == .full && !SecureFile.exists(files.writeAheadLog)
        let makesInboxKey = !SecureFile.exists(files.inboxKey)
        let removesMarker = SecureFile.exists(files.creationMarker)
        // Without a log sync to come, the inbox key file's own folder sync makes the removal durable too.
        try StoreCreationMarker.remove(
            at: files.creationMarker, syncingFolder: !makesInboxKey && !logSyncsFolder, in: configuration.fileSystem)
        let (publicKey, privateKey) = try LockedInbox(configuration: configuration).openKeyPair(
            storeKey: storeKey, syncingFolder: !logSyncsFolder)
        let waitsForSync = logSyncsFolder && (makesInboxKey || removesMarker)
        return (publicKey, privateKey, waitsForSync ? SecureFile.folder(containing: files.database) : nil)
    }

    /// What `keys` records of the store's key, which it said exists.
    ///
    /// `step` says how it was found: it was looked up, or made.
    ///
    /// - Throws: `key-source-inconsistent` when `keys` records nothing of it; what `keys` throws.
    static func keyRecord(_ configuration: StoreConfiguration, keys: any StoreKeyProvider, after step: String) throws -> StoreKeyRecord {
        guard let record = try keys.storeKeyRecord(forStoreAt: configuration.path) else {
            throw StoreError.keySourceInconsistent(
                keys, storePath: configuration.path,
                "it \(step) for the store but storeKeyRecord(forStoreAt:) says it holds none; a source that keeps keys anywhere but the library's key files implements storeKeyRecord(forStoreAt:)")
        }
        guard record.storeID.count == StoreKeyFile.storeIDLength else {
            throw StoreError.keySourceInconsistent(
                keys, storePath: configuration.path,
                "its record of the store's key has a \(record.storeID.count)-byte identifier; a key's identifier is \(StoreKeyFile.storeIDLength) random bytes")
        }
        return record
    }

    /// Whether the store at `files` must be created now, although its key (`record`) exists.
    ///
    /// It must only when its creation was interrupted after the key was made and the marker names that key. It
    /// must also when the marker names none (stage 1, the key was being made) while no inbox key file (made at a
    /// store's first attach) is beside it. The same holds for a store file the creation left empty or shorter
    /// than a page (SQLite had not written its first page yet).
    ///
    /// - Returns: `false` when the store file exists with at least a page (it is opened as it is); `true` for
    ///   an interrupted creation.
    /// - Throws: `StoreError.Code.storeUnavailable` when the store file is missing in any other case: the
    ///   store was lost (moved, deleted, or not restored with its key), and no new empty store is made in
    ///   its place. `StoreError.Code.storeDamaged` when it is there but empty or shorter than a page in any
    ///   other case. Nothing is changed on disk.
    static func resumesInterruptedCreation(_ files: StoreFiles, record: StoreKeyRecord) throws -> Bool {
        let size: Int?
        do {
            size = try SecureFile.regularFileSize(at: files.database)
        } catch {
            throw StoreError(wrapping: error)
        }
        if let size {
            // A store file shorter than its first page is a creation's only with a marker that explains it; without
            // one, the open refuses it as a damaged store (`Database`).
            guard size < StoreFormat.current.pageSize, SecureFile.exists(files.creationMarker) else { return false }
            return try creationExplains(files, record: record) { reason, cause in
                StoreError(
                    code: .storeDamaged,
                    message: "the store file \(files.database) is \(size) bytes, shorter than its first page, and \(reason): the store was emptied or cut short. It is not opened as a new, empty store; every file was left as it is",
                    cause: cause)
            }
        }
        return try creationExplains(files, record: record) { reason, cause in StoreError.storeLost(files, reason: reason, cause: cause) }
    }

    /// Whether an interrupted creation explains the store file being missing (or empty).
    ///
    /// It does when the marker names the key (`record`), or names none while nothing shows the key's store
    /// existed.
    ///
    /// - Parameter unexplained: the error for the reason the creation does not explain it.
    private static func creationExplains(
        _ files: StoreFiles, record: StoreKeyRecord, unexplained: (_ reason: String, _ cause: (any Error)?) -> StoreError
    ) throws -> Bool {
        if SecureFile.exists(files.writeAheadLog) {
            throw unexplained("its write-ahead log \(files.writeAheadLog) is there without it", nil)
        }
        let marker: StoreCreationMarker?
        do {
            marker = try StoreCreationMarker.read(at: files.creationMarker)
        } catch {
            throw unexplained("the creation marker \(files.creationMarker) names no creation (\(error))", error)
        }
        guard let marker else {
            throw unexplained("no creation of it was in progress (no creation marker)", nil)
        }
        guard case .keyMade = marker.stage else {
            // The creation was interrupted between asking for the key and naming it (a crash in that instant):
            // the key is the one it made — unless something shows that the key's store existed. The inbox key
            // file is made at a store's first attach, after its schema.
            if SecureFile.exists(files.inboxKey) {
                throw unexplained(
                    "the creation marker \(files.creationMarker) names no key while the inbox key file \(files.inboxKey) shows that the key's store existed",
                    nil)
            }
            LogSubsystem.store.makeLogger().debug(
                "finishing a store creation interrupted while its key was made", metadata: ["store": "\(files.database)"])
            return true
        }
        guard marker.names(record) else {
            throw unexplained("the creation marker \(files.creationMarker) belongs to the creation of another key", nil)
        }
        LogSubsystem.store.makeLogger().debug("finishing an interrupted store creation", metadata: ["store": "\(files.database)"])
        return true
    }
}
