package import DiskModel
public import SecureKeys

/// What a key source answers when asked for a store's key now.
///
/// It answers "can I have this store's key now?" in three ways, because only one of them may ever lead to creating a
/// key.
public enum StoreKeyLookup: Sendable {
    /// The source holds the store's key and can unwrap it now.
    ///
    /// Here is the store key.
    case available(SecureBytes)
    /// The source holds the store's key but cannot give it now (locked, or before the first unlock).
    ///
    /// Wait for the device's *did become available* event. Never create a key in this state.
    case locked(ProtectionClass)
    /// The source holds no key for the store, so the store was never created.
    ///
    /// Only this case may create a key, and only when no store file exists either.
    case absent
}

extension StoreKeyLookup: CustomStringConvertible {
    /// `available`, `locked (CLASS)` or `absent`, never the key.
    public var description: String {
        switch self {
        case .available: "available"
        case .locked(let protectionClass): "locked (\(protectionClass.name))"
        case .absent: "absent"
        }
    }
}

/// What a key source records of one store's key, beside the key itself.
///
/// This is which key it is, the class that protects it and the format of the store it opens. Nothing in it is secret,
/// and a source answers it while locked.
///
/// The attach needs it to open a store with the settings it was written with (``storeFormat``) and to tell an
/// interrupted creation from a lost store (``storeID``: the creation marker names the key a creation made).
public struct StoreKeyRecord: Sendable, Hashable {
    /// A random identifier the source gave this key when it made it.
    ///
    /// It is `StoreKeyFile.storeIDLength` bytes, not secret. A key made again for the same store path has another one.
    public var storeID: [UInt8]
    /// The class whose key protects the store key.
    public var protectionClass: ProtectionClass
    /// The format of the store file this key opens.
    ///
    /// This is `StoreFormat.current` for a key made by
    /// ``StoreKeyProvider/createStoreKey(forStoreAt:protectionClass:)``.
    public var storeFormat: StoreFormat

    /// A record of a store key.
    ///
    /// - Parameters:
    ///   - storeID: the key's random identifier, `StoreKeyFile.storeIDLength` bytes.
    ///   - protectionClass: the class whose key protects the store key.
    ///   - storeFormat: the format of the store file the key opens.
    public init(storeID: [UInt8], protectionClass: ProtectionClass, storeFormat: StoreFormat) {
        self.storeID = storeID
        self.protectionClass = protectionClass
        self.storeFormat = storeFormat
    }

    /// The record a store key file (`StoreKeyFile`) holds in its header.
    public init(_ keyFile: StoreKeyFile) {
        self.init(storeID: keyFile.storeID, protectionClass: keyFile.protectionClass, storeFormat: keyFile.storeFormat)
    }

    /// The record in the header of the store key file beside the store at `storePath`, or `nil` when there is none.
    ///
    /// The file is `StoreFiles/key`. Reads the header only, so the store key stays wrapped.
    ///
    /// - Throws: `SecureKeysError` when the key file is damaged, of an unknown version, or not a regular file.
    public static func ofKeyFile(forStoreAt storePath: String) throws -> StoreKeyRecord? {
        let keyPath = StoreFiles(database: storePath).key
        guard SecureFile.exists(keyPath) else { return nil }
        return StoreKeyRecord(try StoreKeyFile.load(from: keyPath))
    }
}

/// Where a store coordinator gets its store keys.
///
/// This is the simulated device, the Linux session device, the device agent's client, or a source of the app's own (a
/// keychain, a TPM, a secret service, memory).
///
/// The source decides where keys live. The library never reads or writes a key file behind its back: what
/// it needs of a key — the key itself, its identifier, the store's format — it asks through these calls. The
/// store key file format (`StoreKeyFile`, <doc:/SecureKeys/KeyFileFormats>) is one way to keep keys, the
/// simulated and Linux devices' way; a source may keep them anywhere else. Where a key file is there, a
/// restore handles it as one of the store's files: a replaced store's key file is kept aside with the others,
/// and the one a source made for a restore's staged store is removed when that restore fails.
///
/// ## The contract
///
/// The attach of a store, one at a time per store folder (in this process and across processes), calls:
/// ``lookUpStoreKey(forStoreAt:)`` first; when it says ``StoreKeyLookup/available(_:)``,
/// ``storeKeyRecord(forStoreAt:)`` for the store's format and identifier; when it says
/// ``StoreKeyLookup/absent`` and no store file exists, ``createStoreKey(forStoreAt:protectionClass:)``, then
/// ``storeKeyRecord(forStoreAt:)`` for the new key's identifier (also after a creation that threw, to learn
/// whether a key was made). An export and a backup ask the same as an attach of an existing store. A restore
/// (`StoreBackup.restore`) calls ``storeKeyRecord(forStoreAt:)`` for the target (a key there means a store is
/// there), ``createStoreKey(forStoreAt:protectionClass:)`` for a staged store beside the target
/// (`<store>.restoring-…-store`), then ``moveStoreKey(from:to:)`` to put that key in place — and, when it
/// replaces a store whose key the source keeps elsewhere than a key file, to keep the old key aside with the old
/// store's files. A rewrite (`migrate`) calls ``storeKeyFile(forStoreAt:recording:)``. Calls come from the
/// store's own threads, never from the main actor; each may block briefly (a file, a socket, a keychain), never
/// for a user's answer.
///
/// A source must:
/// - say ``StoreKeyLookup/absent`` only when it holds no key for the store — never for a key it merely
///   cannot reach now (that is ``StoreKeyLookup/locked(_:)``, or a thrown error): an `absent` leads to a new
///   key and a new, empty store;
/// - never mint a key while locked: after a look-up said *locked*, or whenever the class's key is not held,
///   `createStoreKey` throws `protected-data-unavailable` and makes nothing;
/// - never replace a key it holds: `createStoreKey` for a store that has one throws (`already-exists`);
/// - never return a key it has wiped or will wipe: the `SecureBytes` it returns belong to the caller, who
///   wipes them when the store closes;
/// - answer ``storeKeyRecord(forStoreAt:)`` for every key it holds, locked or not, with the identifier it gave
///   the key when it made it, unchanged until the key is gone;
/// - move a key whole: after ``moveStoreKey(from:to:)`` the destination has the same key and the same record,
///   the source path none; a destination that has a key is refused (`already-exists`) and nothing changes;
/// - keep every key until the app deletes the store: a key lost is a store lost.
///
/// Two operations are about the library's key files themselves, and need a source that keeps its keys in them
/// (or implements the call): a rewrite (`migrate`) replaces `<store>.key` at its commit point, so a source
/// that keeps keys elsewhere cannot migrate its stores (``storeKeyFile(forStoreAt:recording:)``'s default says
/// so with `key-source-unsupported`); and the command-line tool works on a simulated device's state directory,
/// whose keys are key files.
///
/// `ProtectedStoreTesting`'s `StoreKeySourceConformance` checks these on a source of the app's own.
public protocol StoreKeyProvider: Sendable {
    /// The store's key, looked up three ways. Called at every attach, first.
    ///
    /// - Returns: ``StoreKeyLookup/available(_:)`` with a key the caller owns (it wipes it), or
    ///   ``StoreKeyLookup/locked(_:)`` when the source holds a key it cannot give now, or
    ///   ``StoreKeyLookup/absent`` when it holds none.
    /// - Throws: when the source cannot tell (a damaged or unreadable key, a peer that does not answer): never
    ///   a reason to make a new key, and the attach fails with the error.
    func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup
    /// Creates the key of a new store.
    ///
    /// Only after a look-up said ``StoreKeyLookup/absent``. The new key records `protectionClass` and
    /// `StoreFormat.current`, and a new random identifier.
    ///
    /// - Returns: the new store key, which the caller owns (it wipes it).
    /// - Throws: when the class key is not held now (the device locked between the look-up and this call),
    ///   an error whose code is `protected-data-unavailable` — ``DeviceError/protectedDataUnavailable(_:)``, or
    ///   `StoreError.protectedDataUnavailable(_:)` from a source written against `ProtectedStore` — and the
    ///   controller waits for *did become available*; nothing may be made then. `already-exists` when the source
    ///   holds a key for the store. Any other error fails the attach and is presented.
    func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes
    /// What the source records of the store's key, or `nil` when it holds no key for the store.
    ///
    /// The record is its identifier, class and the store's format, never the key. It is answered while locked too.
    /// Called at the attach after a look-up said ``StoreKeyLookup/available(_:)`` and after
    /// ``createStoreKey(forStoreAt:protectionClass:)``.
    ///
    /// A default implementation reads the header of the library's store key file beside the store
    /// (``StoreKeyRecord/ofKeyFile(forStoreAt:)``): right for a source that keeps its keys in `StoreKeyFile`s,
    /// as sources written before this call was added do. A source that keeps keys anywhere else implements it.
    ///
    /// - Throws: when the source cannot tell (a damaged record); the attach fails with the error.
    func storeKeyRecord(forStoreAt storePath: String) throws -> StoreKeyRecord?
    /// The store's key file as it must read once the store is rewritten in `format`.
    ///
    /// It has the same store key and store identifier, wrapped again by the class key with `format` recorded. Nothing
    /// is written; the store's rewrite (`migrate`) puts it in place of `<store>.key` at its commit point. Called only
    /// by a rewrite, and only for a source that keeps its keys in the library's key files (`StoreKeyFile`).
    ///
    /// A default implementation refuses (`key-source-unsupported`, naming the source): a source that keeps
    /// keys elsewhere cannot migrate its stores.
    ///
    /// - Throws: when the class key is not held now, `protected-data-unavailable`; the key file's errors.
    func storeKeyFile(forStoreAt storePath: String, recording format: StoreFormat) throws -> StoreKeyFile
    /// Moves the key the source holds for the store at `storePath` to the store at `destination`, which must have none.
    ///
    /// The key and the record (identifier, class, format) stay the same, and afterwards the source holds none for
    /// `storePath`. Never a copy left behind that a later look-up could give for both, never a key lost. If it throws,
    /// the key is at one of the two paths. It may need the source unlocked (a source that binds a wrapped key to its
    /// store's path wraps it again). A restore calls it unlocked, having just made a key.
    ///
    /// Called by a restore (`StoreBackup.restore`): to put the key it made for the staged store in place at
    /// the target, to keep a replaced store's key aside with its files (`<store>.replaced-…/<name>`), and to
    /// undo either when the restore fails before its end.
    ///
    /// A default implementation moves the library's store key file (`<storePath>.key` to
    /// `<destination>.key`, by `link` and `unlink`, the folders synced, undone if a step fails): right for a
    /// source that keeps its keys in `StoreKeyFile`s. When that file is not there but the source records a key
    /// for `storePath`, it refuses with `key-source-unsupported`: a source that keeps keys anywhere else
    /// implements this call, or its stores cannot be restored.
    ///
    /// - Throws: `already-exists` when `destination` has a key; `store-unavailable` when `storePath` has
    ///   none; `key-source-unsupported` (the default, for a source that keeps no key file); the file system's
    ///   failures.
    func moveStoreKey(from storePath: String, to destination: String) throws
}

extension StoreKeyProvider {
    /// The record in the header of the library's store key file beside the store, or `nil` without one.
    ///
    /// For a source that keeps its keys in `StoreKeyFile`s.
    ///
    /// - Throws: `SecureKeysError` when the key file is damaged or not a regular file.
    public func storeKeyRecord(forStoreAt storePath: String) throws -> StoreKeyRecord? {
        try StoreKeyRecord.ofKeyFile(forStoreAt: storePath)
    }

    /// Refuses to wrap the store key again.
    ///
    /// This source cannot wrap a store key again in a key file, so its stores cannot be rewritten in another format.
    ///
    /// - Throws: `key-source-unsupported` naming the source's type.
    public func storeKeyFile(forStoreAt storePath: String, recording format: StoreFormat) throws -> StoreKeyFile {
        throw SecureKeysError(
            code: .keySourceUnsupported,
            message: "the key source \(type(of: self)) does not implement storeKeyFile(forStoreAt:recording:): a rewrite to \(format) replaces the store's key file at its commit point, and this source keeps its keys elsewhere. Nothing was changed",
            path: storePath)
    }

    /// Moves the library's store key file beside the store at `storePath` to the store at `destination`.
    ///
    /// It links the key file under the new name and syncs that folder, then removes the old name and syncs its
    /// folder, so a power cut leaves the key under one name or both. For a source that keeps its keys in
    /// `StoreKeyFile`s.
    ///
    /// - Throws: `key-source-unsupported` when there is no key file at `storePath` but the source records a
    ///   key for it (it keeps keys elsewhere and must implement this call); `store-unavailable` when it holds
    ///   none; `already-exists` when `destination` has a key file; `io-error` naming the file.
    public func moveStoreKey(from storePath: String, to destination: String) throws {
        try moveStoreKeyFile(from: storePath, to: destination, in: .real)
    }

    /// Moves the store key file as ``moveStoreKey(from:to:)`` does, in `fileSystem`.
    package func moveStoreKeyFile(from storePath: String, to destination: String, in fileSystem: FileSystem) throws {
        let from = StoreFiles(database: storePath).key
        let to = StoreFiles(database: destination).key
        guard SecureFile.exists(from) else {
            if try storeKeyRecord(forStoreAt: storePath) != nil {
                throw SecureKeysError(
                    code: .keySourceUnsupported,
                    message: "the key source \(type(of: self)) does not implement moveStoreKey(from:to:): it holds the key of \(storePath) but not in the key file \(from), so the key cannot be moved to \(destination). Nothing was changed",
                    path: storePath)
            }
            throw SecureKeysError(code: .storeUnavailable, message: "there is no store key to move: \(type(of: self)) holds none for \(storePath)", path: from)
        }
        // link(2) refuses an existing destination: a key is never written over another. The new name is made
        // durable before the old one is removed, so a power cut at any point leaves the key under one name or
        // both, never neither. A step that fails undoes what was done, so that a move that throws leaves the key
        // where it was.
        try DiskIO.link(from, to: to, in: fileSystem)
        do {
            try DiskIO.syncDirectory(SecureFile.folder(containing: to), purpose: .newFileEntry, in: fileSystem)
            try DiskIO.unlink(from, in: fileSystem)
        } catch {
            try? DiskIO.unlink(to, in: fileSystem)
            throw error
        }
        do {
            try DiskIO.syncDirectory(SecureFile.folder(containing: from), in: fileSystem)
        } catch {
            if (try? DiskIO.link(to, to: from, in: fileSystem)) != nil { try? DiskIO.unlink(to, in: fileSystem) }
            throw error
        }
    }
}
