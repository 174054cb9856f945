package import DiskModel
internal import EncryptedSQLite
internal import Dispatch
internal import Logging
internal import ProtectedData
public import SecureKeys
internal import Glibc
internal import SystemPackage

/// Writes that arrive while the store cannot be opened.
///
/// The device is locked, or has not been unlocked since boot. The writes are sealed to the store's inbox
/// public key and appended to `<store>.inbox`. They are merged into the store, exactly once each and in arrival
/// order, when it attaches and whenever it is attached (the data controller merges appends from its own process
/// at once and polls for other processes' appends).
///
/// Each record is applied in a savepoint of its own: one that cannot be applied (a kind this app version
/// does not know, a constraint, the app's own error) moves to the store's quarantine, still sealed, and the
/// merge goes on. Only a failure of the store itself (disk full, I/O, damage) fails the merge — and then the
/// inbox is left as it was.
///
/// The sender cannot read back what it sealed: only the inbox private key opens a record, and it is wrapped
/// by the store key. Every append is `fsync`ed before it returns; appends and merges exclude each other with
/// `flock`, so a record appended during a merge is never truncated away.
public struct LockedInbox: Sendable {
    /// The files of the store the inbox belongs to.
    public let files: StoreFiles
    /// The largest the inbox file may grow, in bytes.
    ///
    /// An append that would make it larger is refused with `StoreError.Code.inboxFull` and writes nothing.
    /// ``defaultMaximumSize`` unless configured.
    public let maximumSize: Int
    /// Makes the merge truncate the whole inbox at the first span it cannot read.
    ///
    /// Simulation only. The merge stops at the first span it cannot read and truncates the whole inbox, as
    /// it did before damaged bytes were moved aside (`--plant merge-truncates-unread`).
    package var truncatesUnread = false
    /// The store's fault plan, for a merge on a store thread.
    ///
    /// Simulation only. This is ``StoreConfiguration/faultPlan``; the task's plan is used when it is `nil`.
    package var faultPlan: FaultPoint.Plan?
    /// The file system the inbox's files are written in (``StoreConfiguration/fileSystem``).
    package var fileSystem: FileSystem = .real
    /// The append-only file of sealed records.
    var inboxPath: String { files.inbox }
    /// The inbox key file.
    ///
    /// It holds the public key in the clear and the private key wrapped by the store key.
    var keyPath: String { files.inboxKey }

    /// The default cap on the inbox file's size.
    ///
    /// It is 256 MiB (64 records of the largest size, or about two million small ones).
    public static let defaultMaximumSize = 256 << 20

    /// The inbox of the store whose files are `files`.
    ///
    /// The caller is the app, or another process such as an extension that has no store open.
    ///
    /// - Parameters:
    ///   - files: the store's files (``StoreConfiguration/files``).
    ///   - maximumSize: the largest the inbox file may grow, in bytes (``StoreConfiguration/inboxMaximumSize``).
    public init(files: StoreFiles, maximumSize: Int = LockedInbox.defaultMaximumSize) {
        self.files = files
        self.maximumSize = maximumSize
    }

    /// The inbox of the store `configuration` describes, with its size cap.
    ///
    /// - Parameter configuration: the store's configuration.
    public init(configuration: StoreConfiguration) {
        self.init(files: configuration.files, maximumSize: configuration.inboxMaximumSize)
        truncatesUnread = configuration.plantedFault == .mergeTruncatesUnread
        faultPlan = configuration.faultPlan
        fileSystem = configuration.fileSystem
    }

    // MARK: Appending (works while locked)

    /// Seals a built-in key-value change and appends it, durably, before returning.
    ///
    /// - Parameter change: the write.
    /// - Returns: the record's identifier.
    /// - Throws: a `StoreError`: `StoreError.Code.inboxUnavailable` when the store has no inbox key yet
    ///   (it is made at the store's first attach), `StoreError.Code.inboxRecordTooLarge` (nothing written),
    ///   `StoreError.Code.keyFileDamaged`, `StoreError.Code.ioError`.
    @discardableResult
    public func append(_ change: InboxEntry.Change) throws -> InboxEntry.ID {
        try append(contentsOf: [change])[0]
    }

    /// Seals every change and appends them in order with one `fsync`.
    ///
    /// All are durable when this returns.
    ///
    /// One `fsync` costs about as much as sealing three records (on the project's machine: 203 µs against
    /// 64 µs), so a burst of writes — location updates collected while locked — goes much faster as a batch.
    ///
    /// - Parameter changes: the writes, in order.
    /// - Returns: the records' identifiers, in order.
    /// - Throws: as ``append(_:)-(InboxEntry.Change)``. Every record is sealed and checked before anything is written; after a
    ///   failure of the write itself, any record of the batch may or may not have been written (a partial
    ///   last record is a torn tail, which the merge ignores).
    @discardableResult
    public func append(contentsOf changes: [InboxEntry.Change]) throws -> [InboxEntry.ID] {
        try appendPayloads(changes.count) { index, id, sequence in
            try InboxEntry.payload(for: changes[index], id: id, sequence: sequence)
        }
    }

    /// Seals an app's own change and appends it, durably, before returning.
    ///
    /// - Parameter change: the change; its ``InboxChange/kind`` and ``InboxChange/schemaVersion`` travel with it.
    /// - Returns: the record's identifier.
    /// - Throws: as ``append(_:)``; `StoreError.Code.invalidArgument` for a kind that is empty, longer than
    ///   255 bytes, or `put`/`delete`.
    @discardableResult
    public func append<Change: InboxChange>(_ change: Change) throws -> InboxEntry.ID {
        try append(contentsOf: [change])[0]
    }

    /// Seals an app's own changes and appends them in order with one `fsync`.
    ///
    /// - Parameter changes: the changes, in order.
    /// - Returns: the records' identifiers, in order.
    /// - Throws: as ``append(_:)-(Change)``.
    @discardableResult
    public func append<Change: InboxChange>(contentsOf changes: [Change]) throws -> [InboxEntry.ID] {
        try appendPayloads(changes.count) { index, id, sequence in
            try InboxEntry.payload(for: changes[index], id: id, sequence: sequence)
        }
    }

    /// Seals a record of `kind` whose body is the JSON object `{"key": …, "value": …}`.
    ///
    /// It serves the command-line tool's `inbox put --kind`, which writes records an app of another version
    /// would apply.
    package func append(kind: String, key: String, value: String, schemaVersion: Int = 1) throws -> InboxEntry.ID {
        if kind == InboxEntry.putKind { return try append(.put(key: key, value: value)) }
        return try appendPayloads(1) { _, id, sequence in
            try InboxEntry.payload(
                id: id, kind: kind, schemaVersion: schemaVersion, json: ["key": key, "value": value], sequence: sequence)
        }[0]
    }

    /// Makes `count` payloads, seals them all, then appends them with one `fsync`.
    ///
    /// Each payload has a fresh identifier and its sequence number. All of it runs under the inbox's lock, as a
    /// sequence number is the record's offset.
    private func appendPayloads(
        _ count: Int, _ payload: (_ index: Int, _ id: InboxEntry.ID, _ sequence: UInt64) throws -> SecureBytes
    ) throws -> [InboxEntry.ID] {
        do {
            guard SecureFile.exists(keyPath) else { throw StoreError.inboxUnavailable() }
            let keyFile = try InboxKeyFile.load(from: keyPath)
            var ids: [InboxEntry.ID] = []
            try write { size in
                let base = try InboxSequence.base(at: files.inboxSequence)
                var records: [UInt8] = []
                for index in 0..<count {
                    let id = InboxEntry.ID.random()
                    let plaintext = try payload(index, id, base + UInt64(size + records.count) + 1)
                    defer { plaintext.wipe() }
                    records += try InboxRecord.seal(plaintext, to: keyFile.publicKey)
                    ids.append(id)
                }
                return records
            }
            LogSubsystem.inbox.makeLogger().debug(
                "records sealed and appended", metadata: ["store": "\(files.database)", "count": "\(count)"])
            return ids
        } catch let crash as SimulatedCrash {
            throw crash
        } catch {
            throw Self.storeError(error)
        }
    }

    /// Appends sealed records and `fsync`s them and their folder, under the inbox's lock.
    ///
    /// It first cuts off a torn tail an interrupted append left (moved to the damaged-bytes file), so the
    /// new records never follow half a record. A write or sync that fails cuts the file back to where it was.
    ///
    /// - Parameter makeRecords: seals the records, given the size of the file they will follow.
    private func write(_ makeRecords: (_ size: Int) throws -> [UInt8]) throws {
        guard let (file, _) = try InboxFile.openForUpdate(inboxPath, create: true, appending: true, in: fileSystem) else { return }
        defer { file.close() }
        try lock(file.descriptor)
        // The size under the lock: another process may have appended or merged since the open.
        let size = try cutTornTail(of: file, size: try file.size())
        var records = try makeRecords(size)
        let torn = FaultPoint.planned(at: .inboxAppendTorn) == .crash
        if torn { records = Array(records.prefix(records.count / 2)) }
        guard size + records.count <= maximumSize else {
            throw StoreError.inboxFull(path: inboxPath, size: size, adding: records.count, maximum: maximumSize)
        }
        do {
            if case .failAfterWriting(let bytes, let code)? = FaultPoint.planned(at: .inboxAppendWrite, path: inboxPath) {
                try file.write(records.prefix(bytes))
                throw SecureKeysError.io("cannot write", path: inboxPath, errno: code)
            }
            try file.write(records)
            if case .fail(let code)? = FaultPoint.planned(at: .inboxAppendSync, path: inboxPath) {
                throw SecureKeysError.io("cannot fsync", path: inboxPath, errno: code)
            }
            if torn {
                try file.sync(purpose: .inboxAppend)
                throw SimulatedCrash(point: .inboxAppendTorn)
            }
            try file.sync(purpose: .inboxAppend)
            // The folder too, every time: the file's name is durable only once its folder is synced, and an
            // earlier append — of this process or another — that created the file may have failed before it
            // synced the folder (found by the simulator: a power cut then lost this acknowledged append with the
            // whole file). One more fsync per append call; a batch pays it once.
            try DiskIO.syncDirectory(SecureFile.folder(containing: files.database), in: fileSystem)
        } catch let crash as SimulatedCrash {
            throw crash
        } catch {
            // Nothing of a failed append stays behind it: the file is as it was, and the caller learns the error.
            try? file.truncate(to: size)
            try? file.sync()
            throw error
        }
    }

    /// Moves a torn tail to the damaged-bytes file and cuts it off.
    ///
    /// This happens when the file does not end on a record boundary and its last piece is a torn tail
    /// (`ftruncate`, `fsync`). Intact records and damage in the middle are never touched. The merge reports them.
    ///
    /// - Returns: the file's size after the cut.
    private func cutTornTail(of file: DiskIO.File, size: Int) throws -> Int {
        let source = InboxBytesInFile(descriptor: file.descriptor, path: inboxPath, count: size)
        guard size > 0, !(try InboxRecord.endsOnRecordBoundary(source)) else { return size }
        guard case .tornTail(let offset, let length)? = try InboxRecord.layout(of: source).last else { return size }
        try InboxDamagedBytes.append([.init(offset: offset, length: length)], from: source, to: files.inboxDamaged, in: fileSystem)
        try file.truncate(to: offset)
        try file.sync()
        LogSubsystem.inbox.makeLogger().notice(
            "torn record cut off before an append",
            metadata: ["store": "\(files.database)", "offset": "\(offset)", "bytes": "\(length)", "moved-to": "\(files.inboxDamaged)"])
        return offset
    }

    /// Whether the inbox file holds anything.
    ///
    /// It takes one `stat`, no read and no key. This is what the controller's poll asks.
    var hasPendingRecords: Bool {
        guard let info = try? Stat(FilePath(inboxPath), followTargetSymlink: false) else { return false }
        return info.type == .regular && info.size > 0
    }

    /// How many records wait to be merged.
    ///
    /// No key is needed. It counts the intact records, and those whose checksum fails but whose bytes are where
    /// their length says (the merge applies or quarantines them). Read as the merge reads: regular files only,
    /// never following a link, never blocking.
    ///
    /// - Throws: a `StoreError`: `StoreError.Code.inboxUnusable` when the inbox path is not a regular
    ///   file, `StoreError.Code.ioError` when it cannot be read.
    public func pendingCount() throws -> Int {
        do {
            guard let (descriptor, size) = try InboxFile.openForReading(inboxPath) else { return 0 }
            defer { close(descriptor) }
            return try InboxRecord.layout(of: InboxBytesInFile(descriptor: descriptor, path: inboxPath, count: size)).count {
                if case .record = $0 { true } else { false }
            }
        } catch {
            throw Self.storeError(error)
        }
    }

    /// How many bytes merges and appends have moved to the damaged-bytes file.
    ///
    /// The file is `<store>.inbox-damaged`, and the bytes were moved because they were not records. The count
    /// is 0 when there is none.
    ///
    /// - Throws: as ``pendingCount()``.
    public func damagedByteCount() throws -> Int {
        do {
            return try InboxDamagedBytes.summary(at: files.inboxDamaged).bytes
        } catch {
            throw Self.storeError(error)
        }
    }

    /// A `StoreError` for a failure of the inbox's files.
    static func storeError(_ error: any Error) -> StoreError {
        if let unusable = error as? InboxFile.Unusable { return StoreError.inboxUnusable(path: unusable.path, reason: unusable.reason) }
        return StoreError(wrapping: error)
    }

    // MARK: Files

    func lock(_ descriptor: Int32) throws {
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw SecureKeysError.io("cannot lock", path: inboxPath, errno: errno) }
        }
    }
}

extension FaultPoint {
    /// Half of an append's records are written and synced, then the process dies.
    ///
    /// This leaves a torn last record.
    package static let inboxAppendTorn = FaultPoint("inbox append torn")
    /// An append's write.
    ///
    /// The fault is ``FaultPoint/Effect/failAfterWriting(bytes:_:)``, a short write, as a full disk or a
    /// file-size limit ends one.
    package static let inboxAppendWrite = FaultPoint("inbox append write")
    /// An append's `fsync`, once its records are written (``FaultPoint/Effect/fail(_:)``).
    package static let inboxAppendSync = FaultPoint("inbox append sync")
}
