public import EncryptedSQLite
public import SecureKeys
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// What a merge did: records applied, records skipped because an earlier merge applied them (a crash
/// between the commit and the truncation), and problems found (a torn last record, altered records).
public struct InboxMergeReport: Sendable, Hashable {
    /// Records applied to the store by this merge.
    public var merged = 0
    /// Records found again that an earlier merge had applied (a crash between its commit and the truncation):
    /// skipped, never applied twice.
    public var alreadyApplied = 0
    /// What was wrong in the inbox file: a torn last record, altered or foreign records. Reported, never applied.
    public var problems: [InboxRecord.Problem] = []

    /// An empty report.
    public init() {}
}

/// Writes that arrive while the store cannot be opened — the device is locked, or has not been unlocked
/// since boot — sealed to the store's inbox public key and appended to `<store>.inbox`; merged into the store,
/// exactly once each and in arrival order, the next time it attaches.
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

    /// Seals `change` and appends it, durably, before returning.
    ///
    /// - Parameter change: the write.
    /// - Returns: the entry, with its unique identifier.
    /// - Throws: a ``StoreError``: ``StoreError/Code/inboxUnavailable`` when the store has no inbox key yet
    ///   (it is made at the store's first attach), ``StoreError/Code/keyFileDamaged``,
    ///   ``StoreError/Code/ioError``.
    @discardableResult
    public func append(_ change: InboxEntry.Change) throws -> InboxEntry {
        try append(contentsOf: [change])[0]
    }

    /// Seals every change and appends them in order with one `fsync`: all are durable when this returns.
    ///
    /// One `fsync` costs about as much as sealing three records (on the project's machine: 203 µs against
    /// 64 µs), so a burst of writes — location updates collected while locked — goes much faster as a batch.
    ///
    /// - Parameter changes: the writes, in order.
    /// - Returns: the entries, in order, with their unique identifiers.
    /// - Throws: as ``append(_:)``; after a failure, any record of the batch may or may not have been written
    ///   (a partial last record is a torn tail, ignored by the merge).
    @discardableResult
    public func append(contentsOf changes: [InboxEntry.Change]) throws -> [InboxEntry] {
        do {
            return try appendRecords(changes)
        } catch let crash as SimulatedCrash {
            throw crash
        } catch {
            throw StoreError(wrapping: error)
        }
    }

    private func appendRecords(_ changes: [InboxEntry.Change]) throws -> [InboxEntry] {
        guard SecureFile.exists(keyPath) else { throw StoreError.inboxUnavailable() }
        let keyFile = try InboxKeyFile.load(from: keyPath)
        let entries = changes.map { InboxEntry($0) }
        var records: [UInt8] = []
        for entry in entries { records += try InboxRecord.seal(entry, to: keyFile.publicKey) }
        if Self.crashPoint == .duringAppend { records = Array(records.prefix(records.count / 2)) }
        let isNew = !SecureFile.exists(inboxPath)
        let descriptor = open(inboxPath, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard descriptor >= 0 else { throw SecureKeysError.io("cannot open", path: inboxPath, errno: errno) }
        defer { close(descriptor) }
        try lock(descriptor)
        try SecureFile.writeAll(records, to: descriptor, path: inboxPath)
        guard fsync(descriptor) == 0 else { throw SecureKeysError.io("cannot fsync", path: inboxPath, errno: errno) }
        if isNew { try SecureFile.syncDirectory(SecureFile.folder(containing: files.database)) }
        if Self.crashPoint == .duringAppend { throw SimulatedCrash(point: .duringAppend) }
        return entries
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

    /// Applies every pending record to `database` in one transaction, in arrival order, each at most once
    /// (its identifier is recorded in `inbox_applied`), then truncates the inbox — only after the commit.
    ///
    /// - Parameter apply: writes one entry into the store.
    /// - Returns: what was merged, skipped and rejected. A rejected record is reported, never applied, and
    ///   never blocks the others.
    @_spi(Testing)
    public func merge(
        into database: Database, publicKey: [UInt8], privateKey: SecureBytes,
        apply: (Database, InboxEntry) throws -> Void
    ) throws -> InboxMergeReport {
        var report = InboxMergeReport()
        guard SecureFile.exists(inboxPath) else { return report }
        let descriptor = open(inboxPath, O_RDWR | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { throw SecureKeysError.io("cannot open", path: inboxPath, errno: errno) }
        defer { close(descriptor) }
        try lock(descriptor)
        let bytes = try readAll(descriptor)
        guard !bytes.isEmpty else { return report }
        let (frames, problems) = InboxRecord.scan(bytes)
        report.problems = problems
        var entries: [InboxEntry] = []
        for frame in frames {
            do {
                entries.append(try InboxRecord.open(frame, publicKey: publicKey, privateKey: privateKey))
            } catch let error as SecureKeysError {
                report.problems.append(.rejected(offset: frame.offset, reason: error.message))
            }
        }
        try database.transaction {
            try database.execute("CREATE TABLE IF NOT EXISTS inbox_applied(id BLOB PRIMARY KEY NOT NULL)")
            for entry in entries {
                if try database.scalar("SELECT 1 FROM inbox_applied WHERE id = ?", [.blob(entry.id)]) != nil {
                    report.alreadyApplied += 1
                    continue
                }
                try apply(database, entry)
                try database.execute("INSERT INTO inbox_applied(id) VALUES (?)", [.blob(entry.id)])
                report.merged += 1
            }
        }
        if Self.crashPoint == .afterCommit { throw SimulatedCrash(point: .afterCommit) }
        guard ftruncate(descriptor, 0) == 0, fsync(descriptor) == 0 else {
            throw SecureKeysError.io("cannot truncate", path: inboxPath, errno: errno)
        }
        return report
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
