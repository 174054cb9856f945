internal import DiskModel
internal import EncryptedSQLite
internal import Logging
internal import ProtectedData
internal import SecureKeys

/// Creating a store, and telling an interrupted creation from a lost store.
///
/// Creation is two steps, the key (made by the key source) and then the store, so a crash can fall between
/// them, or in the store's building. The creation marker (``StoreCreationMarker``) says that one creation is in
/// progress: written and made durable before the key is asked for, removed once the store is built and durable.
/// A key without its store is finished as an interrupted creation only when such a marker is beside it and
/// nothing shows that the key's store ever existed (the inbox key file, made at a store's first attach once the
/// store is durable). A store file beside the marker is the interrupted creation's, unfinished: it is moved
/// aside and the store built again (``buildStore(_:key:database:)``). Markers that versions before 0.2 wrote
/// are still read. The library learns of the key only through its source: it never reads or writes a key file.
/// keys/README.md, "The creation, step by step", goes through every crash point.
extension StoreCoordinator {
    /// Starts the creation of a new store and makes its key.
    ///
    /// Nothing is written where a store file or its log exists without a key (`store-exists-without-key`):
    /// that is someone's data, never given a new key, and not a creation. Otherwise the marker is written and
    /// its folder synced, then the key made through `keys`. A creation that ends without a key removes its
    /// marker; one that ends with a key leaves it, and the next attach finishes the creation.
    ///
    /// - Returns: the new store key, and what `keys` records of it.
    /// - Throws: `store-exists-without-key`; `key-source-inconsistent` when `keys` made a key but records none;
    ///   what `keys` or the marker's write throw.
    static func createStoreKey(
        _ configuration: StoreConfiguration, keys: any StoreKeyProvider
    ) throws -> (key: SecureBytes, record: StoreKeyRecord) {
        let files = configuration.files
        for existing in [files.database, files.writeAheadLog] where SecureFile.exists(existing) {
            throw SecureKeysError.storeExistsWithoutKey(storePath: existing)
        }
        try StoreCreationMarker(stage: .building).write(to: files.creationMarker, in: configuration.fileSystem)
        let storeKey: SecureBytes
        do {
            storeKey = try keys.createStoreKey(forStoreAt: configuration.path, protectionClass: configuration.protectionClass)
        } catch {
            // Without a key this creation made nothing, and its marker must not outlive it. With one (made
            // before the failure was reported, or by a creation beside this one) — or when the source cannot
            // tell — the marker stays as it is, and the next attach finishes the creation if the key is there.
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
        } catch {
            // The key stays beside the marker, which the next attach takes for this interrupted creation.
            storeKey.wipe()
            throw error
        }
        return (storeKey, record)
    }

    /// Builds the new store in its place, with its migrations, and makes it durable; returns its connection.
    ///
    /// Until it is durable, nothing in the store is anyone's: its rollback journal is in memory and nothing is
    /// synced (``EncryptedSQLite/Database/Configuration/buildsNewFile``), so a crash may leave any part of it,
    /// which the next attach removes and builds again (the creation marker, of stage 3, says so). Every
    /// migration runs in one transaction. The last commit puts the store in WAL mode and syncs the file, with
    /// every page written before; then its folder is synced. The creation costs those two syncs where writing
    /// the new store through a rollback journal on disk and then its log costs eight.
    ///
    /// - Parameters:
    ///   - configuration: the store's configuration; its migrator runs on the new store.
    ///   - key: the store key.
    ///   - database: the connection's settings, in the store's format.
    /// - Returns: the store's connection, the store durable.
    /// - Throws: what SQLite, the migrations and the file system throw. What was built stays beside the creation
    ///   marker; the next attach moves it aside and builds the store again.
    static func buildStore(_ configuration: StoreConfiguration, key: SecureBytes, database: Database.Configuration) throws -> Database {
        let files = configuration.files
        var settings = database
        settings.createIfMissing = true
        settings.buildsNewFile = settings.usesWAL
        let store = try Database(path: files.database, key: key, configuration: settings)
        do {
            let applied = try configuration.migrator.includingKeyValue.migrate(store, inOneTransaction: true)
            LogSubsystem.migrations.makeLogger().debug(
                "migrations applied", metadata: ["store": "\(configuration.path)", "migrations": "\(applied)"])
            if settings.buildsNewFile { try store.finishBuilding() }
            try DiskIO.syncDirectory(SecureFile.folder(containing: files.database), in: configuration.fileSystem)
        } catch {
            // What was built stays beside the marker, which the next attach takes for this interrupted creation.
            store.close()
            throw error
        }
        return store
    }

    /// Moves aside what an interrupted creation built of the store: the store file to `<store>.unfinished`, its
    /// log and rollback journal beside it; the log's index, which SQLite rebuilds, is removed.
    ///
    /// It is called only beside a creation marker of stage 3, whose removal — durable before the attach that
    /// built the store returned — would have come first if anything in the store had ever been acknowledged.
    /// Still, nothing is deleted but empty files: what an earlier interrupted creation moved aside is replaced.
    /// Each file must be a regular file: anything else there is `io-error`, and nothing is moved.
    static func moveAsideUnfinishedStore(_ files: StoreFiles, in fileSystem: FileSystem) throws {
        let moves = [
            (files.database, files.unfinished), (files.writeAheadLog, files.unfinished + "-wal"),
            (files.database + "-journal", files.unfinished + "-journal"),
        ]
        // Every file is checked before any is touched.
        let sizes = try moves.map { try SecureFile.regularFileSize(at: $0.0) }
        let sharedMemorySize = try SecureFile.regularFileSize(at: files.sharedMemory)
        var moved = false
        for ((file, aside), size) in zip(moves, sizes) {
            switch size {
            case nil: continue
            case 0: try DiskIO.unlink(file, in: fileSystem)  // nothing in it to keep
            default:
                try DiskIO.rename(file, to: aside, in: fileSystem)
                moved = true
            }
        }
        if sharedMemorySize != nil { try DiskIO.unlink(files.sharedMemory, in: fileSystem) }
        guard moved else { return }
        LogSubsystem.store.makeLogger().debug(
            "an interrupted creation's unfinished store was moved aside", metadata: ["store": "\(files.database)", "to": "\(files.unfinished)"])
    }

    /// Ends the creation of the store `configuration` describes, if one was in progress, and opens its inbox key pair.
    ///
    /// Called once the store is open and durable (``buildStore(_:key:database:)`` built it, or it was there): the
    /// creation marker is removed, and the inbox key file is made at a store's first
    /// attach (`LockedInbox/openKeyPair(storeKey:syncingFolder:)`). Both are changes of the folder's entries,
    /// synced here — except when the store has no log yet and its commits are synced (`synchronous`, `FULL`):
    /// a store SQLite opened in WAL mode has one, but a store whose journal is a rollback journal does not, and
    /// the first sync of its new journal syncs the folder too.
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

    /// What the attach does with the store at `files`, whose key (`record`) exists.
    enum Resumption: Equatable {
        /// The store is there: it is opened as it is.
        case open
        /// A creation was interrupted before the store was durable: what it built (if anything) is moved aside
        /// and the store built again (``buildStore(_:key:database:)``).
        case build
        /// A creation of a version before 0.2 was interrupted before SQLite wrote page 1 into the store file it
        /// had made, empty or shorter than a page: SQLite creates the store in that file.
        case createInPlace
    }

    /// What the attach does with the store at `files`, whose key (`record`) exists.
    ///
    /// A store file is opened as it is — unless a creation marker of stage 3 is beside it: the creation that
    /// built it was interrupted, and it is built again. A missing store is built only when an interrupted
    /// creation explains it: a marker is beside its key, which names that key or none, and no inbox key file
    /// (made at a store's first attach, once the store is durable) shows that the key's store existed. A store
    /// file shorter than a page is a creation's only beside a marker of a version before 0.2 that explains it.
    ///
    /// - Throws: `StoreError.Code.storeUnavailable` when the store file is missing in any other case: the
    ///   store was lost (moved, deleted, or not restored with its key), and no new empty store is made in
    ///   its place. `StoreError.Code.storeDamaged` when it is there but empty or shorter than a page in any
    ///   other case. Nothing is changed on disk.
    static func resumption(_ files: StoreFiles, record: StoreKeyRecord) throws -> Resumption {
        let size: Int?
        do {
            size = try SecureFile.regularFileSize(at: files.database)
        } catch {
            throw StoreError(wrapping: error)
        }
        // Read once: a marker that cannot be read is there too, and names no creation.
        let marker = Result { try StoreCreationMarker.read(at: files.creationMarker) }
        if let size {
            if case .success(let read?) = marker, read.stage == .building { return .build }
            // A store file shorter than its first page is a creation's only with a marker that explains it; without
            // one, the open refuses it as a damaged store (`Database`).
            let markerIsThere = if case .success(nil) = marker { false } else { true }
            guard size < StoreFormat.current.pageSize, markerIsThere else { return .open }
            _ = try creationExplains(files, record: record, marker: marker) { reason, cause in
                StoreError(
                    code: .storeDamaged,
                    message: "the store file \(files.database) is \(size) bytes, shorter than its first page, and \(reason): the store was emptied or cut short. It is not opened as a new, empty store; every file was left as it is",
                    cause: cause)
            }
            return .createInPlace
        }
        _ = try creationExplains(files, record: record, marker: marker) { reason, cause in
            StoreError.storeLost(files, reason: reason, cause: cause)
        }
        return .build
    }

    /// Whether an interrupted creation explains the store file being missing (or empty).
    ///
    /// It does when the marker names the key (`record`), or names none while nothing shows the key's store
    /// existed. A log without the store is a lost store's, unless the marker is of stage 3: a crash in the
    /// store's building may keep the log's name and lose the store's.
    ///
    /// - Parameters:
    ///   - marker: what reading the creation marker gave.
    ///   - unexplained: the error for the reason the creation does not explain it.
    private static func creationExplains(
        _ files: StoreFiles, record: StoreKeyRecord, marker read: Result<StoreCreationMarker?, any Error>,
        unexplained: (_ reason: String, _ cause: (any Error)?) -> StoreError
    ) throws -> Bool {
        let marker: StoreCreationMarker?
        do {
            marker = try read.get()
        } catch {
            throw unexplained("the creation marker \(files.creationMarker) names no creation (\(error))", error)
        }
        if marker?.stage != .building, SecureFile.exists(files.writeAheadLog) {
            throw unexplained("its write-ahead log \(files.writeAheadLog) is there without it", nil)
        }
        guard let marker else {
            throw unexplained("no creation of it was in progress (no creation marker)", nil)
        }
        guard case .keyMade = marker.stage else {
            // The creation was interrupted before the store was durable — while the key was made, or after —
            // and the key is the one it made, unless something shows that the key's store existed. The inbox
            // key file is made at a store's first attach, once the store is durable.
            if SecureFile.exists(files.inboxKey) {
                throw unexplained(
                    "the creation marker \(files.creationMarker) names no key while the inbox key file \(files.inboxKey) shows that the key's store existed",
                    nil)
            }
            LogSubsystem.store.makeLogger().debug(
                "finishing an interrupted store creation", metadata: ["store": "\(files.database)"])
            return true
        }
        guard marker.names(record) else {
            throw unexplained("the creation marker \(files.creationMarker) belongs to the creation of another key", nil)
        }
        LogSubsystem.store.makeLogger().debug("finishing an interrupted store creation", metadata: ["store": "\(files.database)"])
        return true
    }
}
