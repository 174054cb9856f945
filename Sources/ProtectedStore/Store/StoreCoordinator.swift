public import EncryptedSQLite
internal import Logging
internal import ProtectedData
internal import SecureKeys
internal import Glibc

/// An attached store.
///
/// It holds its SQLCipher writer, the serial owner every write goes through, and a pool of read-only
/// connections that reads run on beside it.
///
/// A coordinator only exists for a store that attached successfully — the attach either returns one whose
/// store is open, or throws — and ``DataController`` holds it only in its ready phase, so there is never a
/// coordinator without a store behind it (the bug the Core Data write-up describes: a cached coordinator whose
/// `addPersistentStore` had failed). After a class-A lock closes it, its calls throw
/// `StoreError.Code.protectedDataUnavailable` (the next ready phase brings a new coordinator); after its app
/// closed it (``DataController/terminate()``), `StoreError.Code.closed`.
///
/// An actor: awaited writes are serialized on it, off the main thread; ``read(_:)`` is `nonisolated` and runs on a
/// reader, so it never waits for a write (WAL). ``readNow(_:)`` and ``writeNow(_:)`` are their synchronous forms,
/// run on the caller's thread; a `writeNow` shares the writer connection's lock with every awaited write, so
/// writes still run one at a time. Durability is explicit: every committed write is synced
/// (`synchronous = FULL`, `Database/Configuration/synchronous`).
///
/// Database work runs on threads the store owns, never on Swift's cooperative pool: the actor's executor is a
/// thread of its own (`PStore.writer`), where the attach, every awaited write and the close run, and each reader
/// has one (`PStore.reader`); only the synchronous calls a caller chooses (`readNow`, `writeNow`) run on its own
/// thread. A write that blocks for seconds — a long import, a slow `fsync` — holds up only its
/// own store's writes; reads, other stores and the rest of the app's tasks go on. The threads end when the
/// store closes.
public actor StoreCoordinator {
    /// The store's configuration.
    public nonisolated let configuration: StoreConfiguration
    /// What the merge of the locked inbox did when the store attached.
    package nonisolated let inboxReportAtAttach: InboxMergeReport
    /// The writer connection, which awaited and synchronous writes share under its lock.
    private nonisolated let writer: WriterConnection
    let readers: ReaderPool
    private let commits = CommitBroadcaster()
    private let inbox: LockedInbox
    private let inboxPublicKey: [UInt8]
    private var inboxPrivateKey: SecureBytes?
    /// The writer's thread.
    ///
    /// It is the actor's serial executor.
    private nonisolated let thread: StoreThread

    /// The writer's own thread (`PStore.writer`), on which every job of this actor runs.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { thread.asUnownedSerialExecutor() }

    private init(
        database: sending Database, readers: ReaderPool, configuration: StoreConfiguration, inboxPublicKey: [UInt8],
        inboxPrivateKey: SecureBytes, inboxReport: InboxMergeReport, thread: StoreThread
    ) {
        self.thread = thread
        self.writer = WriterConnection(database)
        self.readers = readers
        self.configuration = configuration
        self.inbox = LockedInbox(configuration: configuration)
        self.inboxPublicKey = inboxPublicKey
        self.inboxPrivateKey = inboxPrivateKey
        self.inboxReportAtAttach = inboxReport
    }

    /// Opens the store with its key, creating the key and the store only when neither exists.
    ///
    /// The key comes from `keys`, which decides where keys live: the attach never reads or writes a key file
    /// itself. What it needs of a key besides the key — its identifier and the store's format — it asks
    /// `keys` too (`StoreKeyProvider/storeKeyRecord(forStoreAt:)`).
    ///
    /// Creation is two steps, the key and then the store, so a crash can fall between them. A marker
    /// (`<store>.creating`) describes the creation in progress and names the key it made: a key without
    /// a store is an interrupted creation, finished now, only when the marker names that key (or none yet,
    /// with no sign that the key's store existed); otherwise it is a lost store, reported and never replaced
    /// by a new empty one (`StoreCreationMarker`).
    ///
    /// Before SQLite recovers a write-ahead log a crash left, the log is checked for damage that recovery
    /// would take for a torn write and silently drop committed transactions over (`Database/Configuration/
    /// checksWriteAheadLog`).
    ///
    /// The blocking work (file I/O, the first page read, the migrations, the merge) runs on the writer's new
    /// thread, which becomes the coordinator's executor; the caller waits suspended. When the attach fails the
    /// thread has ended by the time this throws. Attaches of the stores of one folder run one at a time, in this
    /// process and across processes (``StoreAttachLock``).
    ///
    /// - Throws: `StoreError` with `StoreError.Code.protectedDataUnavailable` when the key is locked — and
    ///   only then; `StoreError.Code.storeUnavailable` for a lost store (its key without it);
    ///   `StoreError.Code.keySourceInconsistent` when `keys` gives or makes a key it records nothing of;
    ///   `StoreError.Code.storeDamaged` (a page or the log, also when the migrations find it); the lower
    ///   layers' errors as they come (`store-exists-without-key` when a store file has no key;
    ///   `wrong-key`, `store-unavailable` from the open; `migration-failed`); `store-damaged` also for a store
    ///   file emptied or cut shorter than its first page, and `io-error` for a link, a FIFO or anything but a
    ///   regular file at the store file or a file SQLite opens beside it — each left as it is.
    package static func attach(_ configuration: StoreConfiguration, keys: any StoreKeyProvider) async throws -> StoreCoordinator {
        let thread = StoreThread(.writer)
        do {
            return try await thread.run {
                try StoreAttachLock.withLock(forStoreAt: configuration.path) { try attach(configuration, keys: keys, on: thread) }
            }
        } catch {
            thread.stop()
            await thread.waitUntilStopped()
            throw error
        }
    }

    /// The attach, on the writer's `thread`.
    private static func attach(
        _ configuration: StoreConfiguration, keys: any StoreKeyProvider, on thread: StoreThread
    ) throws -> StoreCoordinator {
        let files = configuration.files
        // A rewrite (`migrate`) a crash interrupted is finished or undone before the key file's format is read:
        // the key file then matches the store file on disk.
        try StoreRewrite.recover(files, in: configuration.fileSystem)
        let storeKey: SecureBytes
        var databaseConfiguration = configuration.database
        var keyWasAuthenticated = false
        // Whether the store is built now, with every migration (`buildStore`), or opened as it is.
        var builds = false
        switch try keys.lookUpStoreKey(forStoreAt: configuration.path) {
        case .available(let key):
            storeKey = key
            keyWasAuthenticated = true
            do {
                // The store is opened with the settings it was written with, as its key's source records them.
                let record = try keyRecord(configuration, keys: keys, after: "gave the store's key")
                databaseConfiguration.format = record.storeFormat
                // The key exists, so the store must too — unless this key's creation was interrupted before the
                // store was durable. Never make a new empty store in place of a lost one.
                switch try resumption(files, record: record) {
                case .open:
                    databaseConfiguration.createIfMissing = false
                case .createInPlace:
                    databaseConfiguration.createIfMissing = true
                case .build:
                    try moveAsideUnfinishedStore(files, in: configuration.fileSystem)
                    builds = true
                }
            } catch {
                key.wipe()
                throw error
            }
        case .locked(let protectionClass):
            throw StoreError.protectedDataUnavailable(protectionClass)
        case .absent:
            let record: StoreKeyRecord
            (storeKey, record) = try createStoreKey(configuration, keys: keys)
            databaseConfiguration.format = record.storeFormat
            builds = true
        }
        // The key goes to the reader pool, which wipes it when the store closes; wiped here if the attach fails.
        var keyOwnedByPool = false
        defer { if !keyOwnedByPool { storeKey.wipe() } }
        let database: Database
        do {
            database = try builds
                ? buildStore(configuration, key: storeKey, database: databaseConfiguration)
                : Database(path: configuration.path, key: storeKey, configuration: databaseConfiguration)
        } catch let error as StoreError where error.code == .wrongKey && keyWasAuthenticated && !builds {
            // The key came out of its key file authenticated, so it is the right key: the store file is what
            // is wrong (page 1 fails its HMAC, or another file was put in its place). Left as it is.
            var damaged = StoreError.storeDamaged(path: configuration.path, cause: error)
            damaged.message += " (opened as \(Self.formatDescription(databaseConfiguration.format)))"
            throw damaged
        } catch var error as StoreError where error.code == .storeUnavailable || error.code == .storeDamaged {
            if !error.message.contains("opened as") {
                error.message += " (opened as \(Self.formatDescription(databaseConfiguration.format)))"
            }
            throw error
        }
        // The store is durable now (built, or there already), so a creation in progress is complete: its marker
        // goes, and a store's first attach makes its inbox key file (StoreCoordinator+Creation).
        let (publicKey, privateKey, unsyncedFolder) = try finishCreation(
            configuration, storeKey: storeKey, synchronous: databaseConfiguration.synchronous)
        let report: InboxMergeReport
        do {
            // Before the inbox merge, so merged records meet the current schema. A failure leaves the store at
            // its last good migration (or untouched, for a store from a newer app) and fails the attach.
            let migrationLogger = LogSubsystem.migrations.makeLogger()
            migrationLogger.trace("migrating", metadata: ["store": "\(configuration.path)"])
            // A page that fails its HMAC, a failed read or write, a full disk: the migrator reports the store's
            // failure, not the migration's, named where the migrations found it. A store this attach built has
            // every migration already.
            let applied = builds ? [] : try configuration.migrator.includingKeyValue.migrate(database)
            if !applied.isEmpty {
                migrationLogger.debug("migrations applied", metadata: ["store": "\(configuration.path)", "migrations": "\(applied)"])
            } else if let unsyncedFolder {
                // Nothing was committed, so SQLite did not sync the folder.
                try DiskIO.syncDirectory(unsyncedFolder, in: configuration.fileSystem)
            }
            // Writes sealed while the store was locked are applied now, before anything else sees the store.
            report = try LockedInbox(configuration: configuration).merge(
                into: database, publicKey: publicKey, privateKey: privateKey, handlers: configuration.inboxHandlers)
        } catch {
            privateKey.wipe()
            throw error
        }
        // What the migrations and the merge wrote is in the first value every observation reads.
        _ = database.takeCommittedWrites()
        let readers = ReaderPool(
            path: configuration.path, key: storeKey, configuration: databaseConfiguration,
            capacity: max(1, configuration.maximumReaderCount))
        keyOwnedByPool = true
        // Off the launch path: the app hears `ready` while the first reader's thread starts and the reader opens.
        readers.openFirstReader(startingOn: thread)
        LogSubsystem.store.makeLogger().debug(
            "store attached",
            metadata: [
                "store": "\(configuration.path)", "class": "\(configuration.protectionClass)",
                "inbox-merged": "\(report.merged.count)", "inbox-quarantined": "\(report.quarantined.count)",
            ])
        return StoreCoordinator(
            database: database, readers: readers, configuration: configuration, inboxPublicKey: publicKey,
            inboxPrivateKey: privateKey, inboxReport: report, thread: thread)
    }

    /// What an error about a store that does not open says of its format and the library.
    ///
    /// For example, `format 1 (SQLCipher 3, 4096-byte pages, HMAC-SHA1) with SQLCipher 3.4.1`.
    private static func formatDescription(_ format: StoreFormat) -> String {
        "\(format) with \(Database.linkedSQLCipher.map { "\($0)" } ?? "a library that is not SQLCipher")"
    }

    deinit {
        // A coordinator dropped without ``close()`` (a test's): its thread must not outlive it.
        thread.stop()
    }

    // MARK: Access

    /// Whether the store is open.
    public var isOpen: Bool { writer.isOpen }

    /// Runs `body` on a read-only connection, in one read transaction.
    ///
    /// It sees the store as of its start, however many statements it runs, and never waits for a write. A
    /// long import on the writer does not hold it up.
    ///
    /// `nonisolated`: reads do not queue on the coordinator. They run in parallel, up to
    /// ``StoreConfiguration/maximumReaderCount`` at once; past that a read waits for a reader.
    ///
    /// - Parameter body: reads from the store; the connection must not escape it. A write fails with
    ///   `read-only`.
    /// - Returns: what `body` returned.
    /// - Throws: `StoreError.Code.protectedDataUnavailable` after the store closed at a lock, `StoreError.Code.closed` after its app closed it; what
    ///   `body` throws, unchanged, or the read transaction's `StoreError`.
    public nonisolated func read<Result: Sendable>(_ body: @Sendable (Database) throws -> Result) async throws -> Result {
        try await readers.read(body).0
    }

    /// Runs `body` on a read-only connection, in one read transaction, on the calling thread.
    ///
    /// This is the synchronous ``read(_:)``, as GRDB's `read` is.
    ///
    /// For the short reads a UI makes from the main actor: an awaited read hops to a reader's thread and back,
    /// two thread wake-ups that cost more than a one-row read. This one blocks the caller for the read — and,
    /// while all ``StoreConfiguration/maximumReaderCount`` readers are busy, until one is free — so keep long
    /// reads (a scan, an export) on ``read(_:)``. It never waits for a write. Like GRDB's, it is not reentrant: a
    /// `readNow` inside another read's `body` holds one reader and asks for a second, and waits forever when the
    /// pool has no other.
    ///
    /// - Parameter body: reads from the store; the connection must not escape it. A write fails with
    ///   `read-only`.
    /// - Returns: what `body` returned.
    /// - Throws: as ``read(_:)``.
    public nonisolated func readNow<Result>(_ body: (Database) throws -> Result) throws -> Result {
        try readers.readNow(body)
    }

    /// Runs `body` in an immediate transaction on the writer.
    ///
    /// It is committed when it returns (durably, with the default `synchronous = FULL`), and rolled back when
    /// it throws. Writes run one at a time: awaited ones in the order they reach the coordinator, and a
    /// ``writeNow(_:)`` between two of them, never inside one.
    ///
    /// - Parameter body: writes to the store; the connection must not escape it.
    /// - Returns: what `body` returned.
    /// - Throws: `StoreError.Code.protectedDataUnavailable` after the store closed at a lock, `StoreError.Code.closed` after its app closed it, what `body` throws, or
    ///   the commit's `StoreError`.
    public func write<Result: Sendable>(_ body: @Sendable (Database) throws -> Result) throws -> Result {
        try writer.withConnection("write") { database in
            defer { announceCommits(of: database) }
            return try database.transaction { try body(database) }
        }
    }

    /// Runs `body` in an immediate transaction on the writer connection, on the calling thread.
    ///
    /// This is the synchronous ``write(_:)``, as GRDB's `DatabaseQueue.write` is.
    ///
    /// For short writes, where the two thread hops of an awaited write (to the writer's thread and back) cost
    /// as much as the write: the caller's thread is blocked for the write and its `fsync` — and, while another
    /// write runs, until it ends — so keep long writes (an import, a migration of data) on ``write(_:)``. It is
    /// committed when it returns (durably, with the default `synchronous = FULL`), rolled back when it throws,
    /// and observations hear of it as of an awaited write. Writes still run one at a time: it runs between two
    /// awaited writes, never inside one. It is not reentrant: called inside a write's `body` (or an inbox
    /// handler) it throws instead of waiting for itself.
    ///
    /// - Parameter body: writes to the store; the connection must not escape it.
    /// - Returns: what `body` returned.
    /// - Throws: as ``write(_:)``; `StoreError.Code.misuse` when called inside another write's transaction.
    public nonisolated func writeNow<Result>(_ body: (Database) throws -> Result) throws -> Result {
        try writer.withConnection("writeNow") { database in
            defer { announceCommits(of: database) }
            return try database.transaction { try body(database) }
        }
    }

    /// Closes the store after the work already queued on this actor.
    ///
    /// In-flight transactions finish first. Every reader closes with it (a busy one when its read ends), the
    /// copies of the store key and the inbox private key are wiped, and observations stop until the store
    /// attaches again. The writer closes last, once every reader has (a read in flight is waited for), so that
    /// it is the store's last connection and checkpoints the write-ahead log away. It returns once the store's
    /// threads have ended, so that the process may exit (``StoreThreadCensus``). A call on the closed store
    /// still runs, and fails.
    ///
    /// Never call it from the writer's own thread (a transaction's body): it waits for that thread to end.
    ///
    /// - Parameter reason: why it closes, which decides what later calls throw: `StoreError.Code.closed` when the
    ///   app closed it (the default), `StoreError.Code.protectedDataUnavailable` at a lock.
    package nonisolated func close(_ reason: StoreCloseReason = .closedByApp) async {
        await closeConnections(reason)
        await waitUntilThreadsStopped()
    }

    /// ``close(_:)`` on the writer's thread.
    ///
    /// It closes the readers, then the writer's connection, and tells the thread to stop.
    private func closeConnections(_ reason: StoreCloseReason) async {
        // Unusable from here on, once a synchronous write in progress ended: a write that comes while the readers
        // close fails as on a closed store.
        guard let closing = writer.take(reason) else {
            readers.close(reason)
            thread.stop()
            return
        }
        LogSubsystem.store.makeLogger().debug("store closing: readers closed, store key wiped", metadata: ["store": "\(configuration.path)"])
        inboxPrivateKey?.wipe()
        inboxPrivateKey = nil
        commits.finish()
        readers.close(reason)
        await readers.waitUntilThreadsStopped()
        closing.close()
        thread.stop()
    }

    /// Returns once the store's threads, the writer's and every reader's, have ended.
    ///
    /// That happens after ``close()``, once the last read in flight ended.
    package nonisolated func waitUntilThreadsStopped() async {
        await thread.waitUntilStopped()
        await readers.waitUntilThreadsStopped()
    }

    /// Returns once the reader opened at attach is open, or failed to open (the controller's idle wait includes it).
    package nonisolated func waitUntilFirstReaderOpened() async {
        await readers.waitUntilFirstReaderOpened()
    }

    /// How many readers are open, for tests.
    package nonisolated var openReaderCount: Int { readers.openCount }

    /// Whether the reader pool was closed (reads fail with `StoreError.Code.protectedDataUnavailable`).
    package nonisolated var isClosedForReads: Bool { readers.isClosed }

    // MARK: Observation

    /// Calls `onValue` with `read`'s result now, and again after each relevant committed transaction.
    ///
    /// A relevant transaction wrote a table `read` looked at, including the commits of inbox merges. This goes
    /// on until the store closes (then it returns) or the task is cancelled.
    ///
    /// - Throws: what `read` throws; `StoreError.Code.protectedDataUnavailable` when the store closed first.
    package nonisolated func observe<Value>(
        _ read: @Sendable (Database) throws -> Value, onValue: @Sendable (Value) -> Void
    ) async throws {
        // Subscribed before the first read, so a commit between the two is not missed.
        let subscription = commits.subscribe()
        var (value, region) = try await readers.read(trackingTables: true, read)
        onValue(value)
        for await _ in subscription.signals {
            guard subscription.takeWrites().intersects(region) else { continue }
            (value, region) = try await readers.read(trackingTables: true, read)
            onValue(value)
        }
    }

    /// Tells observations what the transactions just committed on `database` wrote.
    private nonisolated func announceCommits(of database: Database) {
        commits.send(database.takeCommittedWrites())
    }

    /// Merges what arrived in the locked inbox since the store attached.
    ///
    /// - Returns: what the merge applied, quarantined and found.
    /// - Throws: `StoreError.Code.protectedDataUnavailable` after the store closed at a lock, `StoreError.Code.closed` after its app closed it; a failure to write the store.
    public func mergeInbox() throws -> InboxMergeReport {
        try withInbox("mergeInbox") { database, privateKey in
            defer { announceCommits(of: database) }
            return try wrappingErrors {
                try inbox.merge(
                    into: database, publicKey: inboxPublicKey, privateKey: privateKey, handlers: configuration.inboxHandlers)
            }
        }
    }

    // MARK: Quarantine

    /// The inbox records that could not be applied and are kept, still sealed, in the store.
    ///
    /// They come oldest first.
    ///
    /// - Throws: `StoreError.Code.protectedDataUnavailable` after the store closed at a lock, `StoreError.Code.closed` after its app closed it.
    public func quarantinedInboxRecords() throws -> [QuarantinedInboxRecord] {
        try writer.withConnection("quarantinedInboxRecords") { database in
            try wrappingErrors {
                let ledger = InboxLedger(database: database)
                try ledger.prepare()
                defer { announceCommits(of: database) }
                return try ledger.quarantined()
            }
        }
    }

    /// Tries to apply quarantined records again, each in its own savepoint.
    ///
    /// This is for after an app update brought a handler for their kind, or a migration made them fit. Those
    /// that apply leave the quarantine. The others stay with their new reason and one more attempt counted.
    ///
    /// - Parameter ids: the records to retry; all of them when `nil`.
    /// - Returns: which were merged and which stay quarantined.
    /// - Throws: `StoreError.Code.protectedDataUnavailable` after the store closed at a lock, `StoreError.Code.closed` after its app closed it; a failure of the store
    ///   itself (nothing changed then).
    public func retryQuarantinedInboxRecords(_ ids: [InboxEntry.ID]? = nil) throws -> InboxMergeReport {
        try withInbox("retryQuarantinedInboxRecords") { database, privateKey in
            defer { announceCommits(of: database) }
            return try wrappingErrors {
                let ledger = InboxLedger(database: database)
                var report = InboxMergeReport()
                try database.transaction {
                    try ledger.prepare()
                    for (id, sealed) in try ledger.sealed(ids) {
                        let opened = try LockedInbox.openRecord(sealed, publicKey: inboxPublicKey, privateKey: privateKey)
                        if let failure = try LockedInbox.apply(opened, with: configuration.inboxHandlers, ledger: ledger) {
                            report.quarantined.append(failure)
                        } else {
                            try ledger.release(id)
                            report.merged.append(id)
                        }
                    }
                }
                return report
            }
        }
    }

    /// Removes quarantined records for good.
    ///
    /// - Parameter ids: the records to remove; all of them when `nil`.
    /// - Returns: how many were removed.
    /// - Throws: `StoreError.Code.protectedDataUnavailable` after the store closed at a lock, `StoreError.Code.closed` after its app closed it.
    @discardableResult
    public func discardQuarantinedInboxRecords(_ ids: [InboxEntry.ID]? = nil) throws -> Int {
        try writer.withConnection("discardQuarantinedInboxRecords") { database in
            defer { announceCommits(of: database) }
            return try wrappingErrors {
                let ledger = InboxLedger(database: database)
                try ledger.prepare()
                return try database.transaction { try ledger.discard(ids) }
            }
        }
    }

    /// Runs `body` with the writer connection and the inbox private key, under the connection's lock.
    ///
    /// - Parameter operation: what the caller does, for the message of a misuse.
    private func withInbox<Result>(_ operation: String, _ body: (Database, SecureBytes) throws -> Result) throws -> Result {
        // Wiped by the close on this actor, after it took the connection: here the lock is not held yet, and
        // `closedError` takes it.
        guard let inboxPrivateKey else { throw writer.closedError }
        return try writer.withConnection(operation) { database in try body(database, inboxPrivateKey) }
    }

    // MARK: Key-value conveniences

    /// Stores `value` under `key`, replacing what was there.
    ///
    /// It is durable when this returns.
    ///
    /// - Throws: a `StoreError` (a failure of SQLite carries its result codes).
    public func put(_ key: String, _ value: String) throws {
        try wrappingErrors {
            try write { try $0.execute("INSERT OR REPLACE INTO entries(key, value) VALUES (?, ?)", [.text(key), .text(value)]) }
        }
    }

    /// The value stored under `key`, or `nil`.
    ///
    /// - Throws: a `StoreError` (a failure of SQLite carries its result codes).
    public nonisolated func value(forKey key: String) async throws -> String? {
        try await wrappingErrors { try await read { try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = ?", [key]) } }
    }

    /// Removes `key`.
    ///
    /// Removing a missing key is not an error.
    ///
    /// - Throws: a `StoreError` (a failure of SQLite carries its result codes).
    public func removeValue(forKey key: String) throws {
        try wrappingErrors { try write { try $0.execute("DELETE FROM entries WHERE key = ?", [.text(key)]) } }
    }

    /// Every key and value, ordered by key.
    ///
    /// - Throws: a `StoreError` (a failure of SQLite carries its result codes).
    public nonisolated func allEntries() async throws -> [(key: String, value: String)] {
        let entries = try await wrappingErrors {
            try await read { database in
                try database.fetchAll(KeyValueEntry.self, "SELECT key, value FROM entries ORDER BY key")
            }
        }
        return entries.map { ($0.key, $0.value) }
    }

    /// Runs one of the coordinator's own operations, reporting a lower layer's failure as a `StoreError`.
    private func wrappingErrors<Result>(_ body: () throws -> Result) throws -> Result {
        do {
            return try body()
        } catch {
            throw StoreError(wrapping: error)
        }
    }

    /// Runs one of the coordinator's own reads, reporting a lower layer's failure as a `StoreError`.
    private nonisolated func wrappingErrors<Result>(_ body: () async throws -> Result) async throws -> Result {
        do {
            return try await body()
        } catch {
            throw StoreError(wrapping: error)
        }
    }

}

/// A row of the key-value table.
private struct KeyValueEntry: Decodable, Sendable {
    var key: String
    var value: String
}
