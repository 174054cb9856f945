public import EncryptedSQLite
internal import Logging
internal import ProtectedData
public import SecureKeys
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// Writes that arrive while the store cannot be opened — the device is locked, or has not been unlocked
/// since boot — sealed to the store's inbox public key and appended to `<store>.inbox`; merged into the store,
/// exactly once each and in arrival order, when it attaches and whenever it is attached (the data controller
/// merges appends from its own process at once and polls for other processes' appends).
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
    /// Where a crash can be simulated, for crash-consistency tests.
    package enum CrashPoint: Sendable, Hashable {
        /// Half of the record is written and synced, then the process dies: a torn last record.
        case duringAppend
        /// The merge transaction committed, and the process dies before the inbox is truncated.
        case afterCommit
    }

    /// A crash simulated at a ``CrashPoint``; nothing is cleaned up, as in a real crash.
    package struct SimulatedCrash: Error, Sendable, Equatable {
        package let point: CrashPoint
    }

    /// Set (for the current task only) to stop appends or merges where a crash would.
    @TaskLocal package static var crashPoint: CrashPoint?

    /// The files of the store the inbox belongs to.
    public let files: StoreFiles
    /// The append-only file of sealed records.
    var inboxPath: String { files.inbox }
    /// The inbox key file: public key in the clear, private key wrapped by the store key.
    var keyPath: String { files.inboxKey }

    /// The inbox of the store whose files are `files` — from the app, or from another process such as an
    /// extension that has no store open.
    ///
    /// - Parameter files: the store's files (``StoreConfiguration/files``).
    public init(files: StoreFiles) { self.files = files }

    // MARK: Appending (works while locked)

    /// Seals a built-in key-value change and appends it, durably, before returning.
    ///
    /// - Parameter change: the write.
    /// - Returns: the record's identifier.
    /// - Throws: a ``StoreError``: ``StoreError/Code/inboxUnavailable`` when the store has no inbox key yet
    ///   (it is made at the store's first attach), ``StoreError/Code/inboxRecordTooLarge`` (nothing written),
    ///   ``StoreError/Code/keyFileDamaged``, ``StoreError/Code/ioError``.
    @discardableResult
    public func append(_ change: InboxEntry.Change) throws -> InboxEntry.ID {
        try append(contentsOf: [change])[0]
    }

    /// Seals every change and appends them in order with one `fsync`: all are durable when this returns.
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
        try appendPayloads(changes.count) { index, id in try InboxEntry.payload(for: changes[index], id: id) }
    }

    /// Seals an app's own change and appends it, durably, before returning.
    ///
    /// - Parameter change: the change; its ``InboxChange/kind`` and ``InboxChange/schemaVersion`` travel with it.
    /// - Returns: the record's identifier.
    /// - Throws: as ``append(_:)``; ``StoreError/Code/invalidArgument`` for a kind that is empty, longer than
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
        try appendPayloads(changes.count) { index, id in try InboxEntry.payload(for: changes[index], id: id) }
    }

    /// Seals a record of `kind` whose body is the JSON object `{"key": …, "value": …}`: for the command-line
    /// tool's `inbox put --kind`, which writes records an app of another version would apply.
    package func append(kind: String, key: String, value: String, schemaVersion: Int = 1) throws -> InboxEntry.ID {
        if kind == InboxEntry.putKind { return try append(.put(key: key, value: value)) }
        return try appendPayloads(1) { _, id in
            try InboxEntry.payload(id: id, kind: kind, schemaVersion: schemaVersion, json: ["key": key, "value": value])
        }[0]
    }

    /// Makes `count` payloads (each with a fresh identifier), seals them all, then appends them with one `fsync`.
    private func appendPayloads(
        _ count: Int, _ payload: (_ index: Int, _ id: InboxEntry.ID) throws -> SecureBytes
    ) throws -> [InboxEntry.ID] {
        do {
            guard SecureFile.exists(keyPath) else { throw StoreError.inboxUnavailable() }
            let keyFile = try InboxKeyFile.load(from: keyPath)
            var ids: [InboxEntry.ID] = []
            var records: [UInt8] = []
            for index in 0..<count {
                let id = InboxEntry.ID.random()
                let plaintext = try payload(index, id)
                defer { plaintext.wipe() }
                records += try InboxRecord.seal(plaintext, to: keyFile.publicKey)
                ids.append(id)
            }
            try write(records)
            LogSubsystem.inbox.makeLogger().debug(
                "records sealed and appended", metadata: ["store": "\(files.database)", "count": "\(count)"])
            return ids
        } catch let crash as SimulatedCrash {
            throw crash
        } catch {
            throw StoreError(wrapping: error)
        }
    }

    /// Appends sealed records and `fsync`s them (and the folder, when the inbox is new).
    private func write(_ sealedRecords: [UInt8]) throws {
        var records = sealedRecords
        if Self.crashPoint == .duringAppend { records = Array(records.prefix(records.count / 2)) }
        let isNew = !SecureFile.exists(inboxPath)
        let file = try DiskIO.open(inboxPath, flags: O_WRONLY | O_APPEND | O_CREAT)
        defer { file.close() }
        try lock(file.descriptor)
        try file.write(records)
        try file.sync(purpose: .inboxAppend)
        if isNew { try SecureFile.syncDirectory(SecureFile.folder(containing: files.database)) }
        if Self.crashPoint == .duringAppend { throw SimulatedCrash(point: .duringAppend) }
    }

    /// Whether the inbox file holds anything: one `stat`, no read, no key — what the controller's poll asks.
    var hasPendingRecords: Bool {
        var info = stat()
        return lstat(inboxPath, &info) == 0 && info.st_size > 0
    }

    /// How many records wait to be merged (complete, intact records; no key needed).
    ///
    /// - Throws: a ``StoreError`` with ``StoreError/Code/ioError`` when the inbox cannot be read.
    public func pendingCount() throws -> Int {
        guard SecureFile.exists(inboxPath) else { return 0 }
        do {
            return InboxRecord.scan(try SecureFile.read(inboxPath, maximumSize: Int.max)).frames.count
        } catch {
            throw StoreError(wrapping: error)
        }
    }

    // MARK: Merging (needs the store key)

    /// The inbox key pair, made (and its file written) the first time a store attaches.
    ///
    /// For the store's attach, and for tests and benchmarks that drive an inbox without a controller.
    ///
    /// - Parameter storeKey: the store's key, which wraps the inbox private key.
    /// - Returns: the public key and the private key (in guarded memory; wipe it when done).
    /// - Throws: a `SecureKeysError` when the inbox key file is damaged or cannot be written.
    @_spi(Testing)
    public func openKeyPair(storeKey: SecureBytes) throws -> (publicKey: [UInt8], privateKey: SecureBytes) {
        if SecureFile.exists(keyPath) {
            let file = try InboxKeyFile.load(from: keyPath)
            return (file.publicKey, try file.unwrapPrivateKey(storeKey: storeKey, path: keyPath))
        }
        let (file, privateKey) = try InboxKeyFile.make(storeKey: storeKey)
        try SecureFile.writeAtomically(file.bytes, to: keyPath, replacing: false)
        return (file.publicKey, privateKey)
    }

    /// Applies every pending record to `database` in one transaction, in arrival order, each in a savepoint
    /// of its own and at most once (its identifier is recorded in `inbox_applied`); a record that cannot be
    /// applied moves to the quarantine. Then truncates the inbox — only after the commit — and forgets the
    /// recorded identifiers, which no record in the file names any more.
    ///
    /// - Parameters:
    ///   - database: the store, open.
    ///   - publicKey: the inbox public key.
    ///   - privateKey: the inbox private key.
    ///   - handlers: how each kind of record is applied.
    /// - Returns: what was merged, quarantined, skipped and found wrong.
    /// - Throws: a failure of the store itself (disk full, I/O, damage): nothing was applied and the inbox
    ///   is left as it was.
    @_spi(Testing)
    public func merge(
        into database: Database, publicKey: [UInt8], privateKey: SecureBytes, handlers: InboxHandlers
    ) throws -> InboxMergeReport {
        var report = InboxMergeReport()
        guard SecureFile.exists(inboxPath) else { return report }
        let file = try DiskIO.open(inboxPath, flags: O_RDWR)
        defer { file.close() }
        try lock(file.descriptor)
        let bytes = try readAll(file.descriptor)
        guard !bytes.isEmpty else { return report }
        let (frames, problems) = InboxRecord.scan(bytes)
        report.problems = problems
        let ledger = InboxLedger(database: database)
        try database.transaction {
            try ledger.prepare()
            let generation = try ledger.nextGeneration()
            func applyAll(isolated: Bool) throws {
                for frame in frames {
                    let opened = Self.openRecord(frame.sealed, publicKey: publicKey, privateKey: privateKey)
                    guard try ledger.markHandled(opened.id, generation: generation) else {
                        report.alreadyApplied += 1
                        continue
                    }
                    if let failure = try Self.apply(opened, with: handlers, ledger: ledger, isolated: isolated) {
                        report.quarantined.append(failure)
                    } else {
                        report.merged.append(opened.id)
                    }
                }
            }
            // Records almost always apply: try them all in one savepoint first, and only when one of them fails
            // go back and give each record a savepoint of its own (a savepoint per record costs a statement
            // journal each).
            try database.execute("SAVEPOINT inbox_merge", [])
            do {
                try applyAll(isolated: false)
                try database.execute("RELEASE inbox_merge", [])
            } catch is RecordNeedsIsolation {
                try database.execute("ROLLBACK TO inbox_merge", [])
                try database.execute("RELEASE inbox_merge", [])
                report = InboxMergeReport()
                report.problems = problems
                try applyAll(isolated: true)
            }
            try ledger.forgetEarlierThan(generation)
        }
        if Self.crashPoint == .afterCommit { throw SimulatedCrash(point: .afterCommit) }
        try file.truncate(to: 0)
        try file.sync()
        let logger = LogSubsystem.inbox.makeLogger()
        logger.debug(
            "inbox merged",
            metadata: [
                "store": "\(files.database)", "merged": "\(report.merged.count)",
                "quarantined": "\(report.quarantined.count)", "already-applied": "\(report.alreadyApplied)",
                "problems": "\(report.problems.count)",
            ])
        for record in report.quarantined {
            logger.trace("record quarantined", metadata: ["kind": "\(record.kind ?? "unreadable")", "attempts": "\(record.attempts)"])
        }
        return report
    }

    /// A record failed while the batch was applied without savepoints of its own.
    struct RecordNeedsIsolation: Error {}

    /// A record as far as it could be opened: an entry, or the reason it cannot be read.
    enum Opened {
        case entry(InboxEntry, sealed: [UInt8])
        case unreadable(InboxEntry.ID, sealed: [UInt8], reason: String)

        var id: InboxEntry.ID {
            switch self {
            case .entry(let entry, _): entry.id
            case .unreadable(let id, _, _): id
            }
        }
    }

    /// Opens a sealed record; one that does not open or decode is named by a checksum of its sealed bytes.
    static func openRecord(_ sealed: [UInt8], publicKey: [UInt8], privateKey: SecureBytes) -> Opened {
        var checksumID: InboxEntry.ID {
            InboxEntry.ID(bytes: KeyDerivation.checksum(of: sealed[...], length: InboxEntry.idLength))
        }
        let payload: SecureBytes
        do {
            payload = try InboxRecord.open(InboxRecord.Frame(offset: 0, sealed: sealed), publicKey: publicKey, privateKey: privateKey)
        } catch {
            return .unreadable(checksumID, sealed: sealed, reason: "it does not open with this store's inbox key")
        }
        guard let entry = InboxEntry.decode(payload: payload) else {
            payload.wipe()
            return .unreadable(checksumID, sealed: sealed, reason: "it holds no valid payload")
        }
        return .entry(entry, sealed: sealed)
    }

    /// Applies an opened record in its own savepoint, or quarantines it.
    ///
    /// - Returns: `nil` when it was applied; its quarantine entry otherwise.
    /// - Throws: a failure of the store itself.
    ///
    /// - Parameter isolated: whether the record gets a savepoint of its own. Without one, a failure of the
    ///   record throws ``RecordNeedsIsolation``: the caller rolls the batch back and applies it isolated.
    static func apply(
        _ opened: Opened, with handlers: InboxHandlers, ledger: InboxLedger, isolated: Bool = true
    ) throws -> QuarantinedInboxRecord? {
        switch opened {
        case .unreadable(let id, let sealed, let reason):
            return try ledger.quarantine(id, kind: nil, schemaVersion: nil, sealed: sealed, reason: reason)
        case .entry(let entry, let sealed):
            defer { entry.wipe() }
            guard isolated else {
                do {
                    try handlers.apply(entry, to: ledger.database)
                    return nil
                } catch {
                    if InboxLedger.failsTheWholeMerge(error) { throw error }
                    throw RecordNeedsIsolation()
                }
            }
            guard let failure = try ledger.applyInSavepoint(entry, handlers: handlers) else { return nil }
            return try ledger.quarantine(
                entry.id, kind: entry.kind, schemaVersion: entry.schemaVersion, sealed: sealed, reason: "\(failure)")
        }
    }

    // MARK: Files

    private func lock(_ descriptor: Int32) throws {
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw SecureKeysError.io("cannot lock", path: inboxPath, errno: errno) }
        }
    }

    private func readAll(_ descriptor: Int32) throws -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress!, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { throw SecureKeysError.io("cannot read", path: inboxPath, errno: errno) }
            if count == 0 { return result }
            result += buffer[..<count]
        }
    }
}
