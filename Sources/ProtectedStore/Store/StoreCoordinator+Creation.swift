internal import Logging
internal import ProtectedData
internal import SecureKeys

/// Creating a store, and telling an interrupted creation from a lost store.
///
/// Creation is two files, the key file and then the store, so a crash can fall between them. The creation
/// marker (``StoreCreationMarker``) describes one creation in progress: written when a creation starts, told
/// which key file the creation made as soon as it exists, removed once the store exists with its schema. A key
/// file without its store is finished only when the marker names that very key file — or, for a crash in the
/// instant between the key file's creation and the marker naming it, when the marker names none and nothing
/// shows that the key file's store ever existed.
extension StoreCoordinator {
    /// Starts the creation of a new store and makes its key.
    ///
    /// Nothing is written where a store file or its log exists without a key file (`store-exists-without-key`):
    /// that is someone's data, never given a new key, and not a creation. Otherwise the marker is written, the
    /// key made through `keys`, and the marker told the new key file's store identifier. A creation that ends
    /// without a key file removes its marker; one whose marker cannot be told the new key file's identifier
    /// fails with that write's error, and the next attach finishes it.
    ///
    /// - Returns: the new store key.
    /// - Throws: `store-exists-without-key`; what `keys` or the marker's writes throw.
    static func createStoreKey(_ configuration: StoreConfiguration, keys: any StoreKeyProvider) throws -> SecureBytes {
        let files = configuration.files
        for existing in [files.database, files.writeAheadLog] where SecureFile.exists(existing) {
            throw SecureKeysError.storeExistsWithoutKey(storePath: existing)
        }
        try StoreCreationMarker(stage: .makingKey).write(to: files.creationMarker)
        let storeKey: SecureBytes
        do {
            storeKey = try keys.createStoreKey(forStoreAt: configuration.path, protectionClass: configuration.protectionClass)
        } catch {
            // Without a key file this creation made nothing, and its marker must not outlive it. With one (made
            // before the failure was reported, or by a creation beside this one) the marker stays as it is: it
            // names no key file, so it never finishes a creation on its own.
            if !SecureFile.exists(files.key) {
                do {
                    try StoreCreationMarker.remove(at: files.creationMarker)
                } catch let removal {
                    // Harmless if left: a creation marker without a key file is replaced by the next creation.
                    LogSubsystem.store.makeLogger().debug(
                        "creation marker not removed", metadata: ["marker": "\(files.creationMarker)", "error": "\(removal)"])
                }
            }
            throw error
        }
        do {
            let keyFile = try StoreKeyFile.load(from: files.key)
            try StoreCreationMarker(stage: .keyMade(storeID: keyFile.storeID)).write(to: files.creationMarker)
        } catch {
            // Said, not swallowed: the disk that refused the marker (full, failing) would refuse the store next,
            // and the error must name it. The key file stays beside a stage-1 marker, which the next attach
            // takes for this interrupted creation and finishes.
            storeKey.wipe()
            throw error
        }
        return storeKey
    }

    /// Whether the store at `files` must be created now, although its key file exists: only when its creation
    /// was interrupted after the key file was made and the marker names that key file, or names none (stage 1:
    /// the key was being made) while no inbox key file — made at a store's first attach — is beside it. The
    /// same holds for a store file the creation left empty or shorter than a page (SQLite had not written its
    /// first page yet).
    ///
    /// - Returns: `false` when the store file exists with at least a page (it is opened as it is); `true` for
    ///   an interrupted creation.
    /// - Throws: `StoreError.Code.storeUnavailable` when the store file is missing in any other case: the
    ///   store was lost (moved, deleted, or not restored with its key file), and no new empty store is made in
    ///   its place. `StoreError.Code.storeDamaged` when it is there but empty or shorter than a page in any
    ///   other case. Nothing is changed on disk.
    static func resumesInterruptedCreation(_ files: StoreFiles) throws -> Bool {
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
            return try creationExplains(files) { reason, cause in
                StoreError(
                    code: .storeDamaged,
                    message: "the store file \(files.database) is \(size) bytes, shorter than its first page, and \(reason): the store was emptied or cut short. It is not opened as a new, empty store; every file was left as it is",
                    cause: cause)
            }
        }
        return try creationExplains(files) { reason, cause in StoreError.storeLost(files, reason: reason, cause: cause) }
    }

    /// Whether an interrupted creation explains the store file being missing (or empty): the marker names the
    /// key file, or names none while nothing shows the key file's store existed.
    ///
    /// - Parameter unexplained: the error for the reason the creation does not explain it.
    private static func creationExplains(
        _ files: StoreFiles, unexplained: (_ reason: String, _ cause: (any Error)?) -> StoreError
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
            // The creation was interrupted between asking for the key and naming its key file (a crash in that
            // instant): the key file is the one it made — unless something shows that the key file's store
            // existed. The inbox key file is made at a store's first attach, after its schema.
            if SecureFile.exists(files.inboxKey) {
                throw unexplained(
                    "the creation marker \(files.creationMarker) names no key file while the inbox key file \(files.inboxKey) shows that the key file's store existed",
                    nil)
            }
            LogSubsystem.store.makeLogger().debug(
                "finishing a store creation interrupted while its key was made", metadata: ["store": "\(files.database)"])
            return true
        }
        let keyFile: StoreKeyFile
        do {
            keyFile = try StoreKeyFile.load(from: files.key)
        } catch {
            throw unexplained("its key file cannot be compared with the creation marker (\(error))", error)
        }
        guard marker.names(keyFile) else {
            throw unexplained("the creation marker \(files.creationMarker) belongs to the creation of another key file", nil)
        }
        LogSubsystem.store.makeLogger().debug("finishing an interrupted store creation", metadata: ["store": "\(files.database)"])
        return true
    }
}
