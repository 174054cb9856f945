public import EncryptedSQLite
internal import ProtectedData
internal import SecureKeys
#if canImport(Glibc)
internal import Glibc
#elseif canImport(Darwin)
internal import Darwin
#endif

/// An attached store: the open SQLCipher connection and the one serial owner all access goes through.
///
/// A coordinator only exists for a store that attached successfully — the attach either returns one whose
/// store is open, or throws — and ``DataController`` holds it only in its ready phase, so there is never a
/// coordinator without a store behind it (the bug the Core Data write-up describes: a cached coordinator whose
/// `addPersistentStore` had failed). After a class-A lock closes it, its calls throw
/// ``StoreError/Code/protectedDataUnavailable``.
///
/// An actor: its work runs on the global concurrent executor, off the main thread.
public actor StoreCoordinator {
    /// The store's configuration.
    public nonisolated let configuration: StoreConfiguration
    /// What the merge of the locked inbox did when the store attached.
    package nonisolated let inboxReportAtAttach: InboxMergeReport
    private var database: Database?
    private let inbox: LockedInbox
    private let inboxPublicKey: [UInt8]
    private var inboxPrivateKey: SecureBytes?

    private init(
        database: sending Database, configuration: StoreConfiguration, inboxPublicKey: [UInt8],
        inboxPrivateKey: SecureBytes, inboxReport: InboxMergeReport
    ) {
        self.database = database
        self.configuration = configuration
        self.inbox = LockedInbox(files: configuration.files)
        self.inboxPublicKey = inboxPublicKey
        self.inboxPrivateKey = inboxPrivateKey
        self.inboxReportAtAttach = inboxReport
    }

    /// Opens the store with its key, creating the key and the store only when neither exists.
    ///
    /// Creation is two files, the key file and then the store, so a crash can fall between them. A marker
    /// (`<store>.creating`) is written before the key and removed once the store exists with its schema:
    /// a key without a store *and* with the marker is an interrupted creation, finished now; a key without a
    /// store and without the marker is a lost store, reported and never replaced by a new empty one.
    ///
    /// Synchronous and blocking (Argon2id is not involved, but file I/O and the first page read are): call it
    /// from a background executor.
    ///
    /// - Throws: ``StoreError`` with ``StoreError/Code/protectedDataUnavailable`` when the key is locked — and
    ///   only then; the lower layers' errors as they come (`store-exists-without-key` when a store file has no
    ///   key file; `wrong-key`, `store-unavailable` from the open), or ``StoreError/Code/storeDamaged``.
    package static func attach(_ configuration: StoreConfiguration, keys: any StoreKeyProvider) throws -> StoreCoordinator {
        let files = configuration.files
        let storeKey: SecureBytes
        var databaseConfiguration = configuration.database
        var keyWasAuthenticated = false
        switch try keys.lookUpStoreKey(forStoreAt: configuration.path) {
        case .available(let key):
            storeKey = key
            keyWasAuthenticated = true
            // The key exists, so the store must too — unless its creation was interrupted after the key was
            // written. Never make a new empty store in place of a lost one.
            databaseConfiguration.createIfMissing = SecureFile.exists(files.creationMarker)
        case .locked(let protectionClass):
            throw StoreError.protectedDataUnavailable(protectionClass)
        case .absent:
            try SecureFile.writeAtomically([], to: files.creationMarker, replacing: true)
            storeKey = try keys.createStoreKey(forStoreAt: configuration.path, protectionClass: configuration.protectionClass)
        }
        defer { storeKey.wipe() }
        let database: Database
        do {
            database = try Database(path: configuration.path, key: storeKey, configuration: databaseConfiguration)
        } catch let error as SQLiteError where error.code == .wrongKey && keyWasAuthenticated {
            // The key came out of its key file authenticated, so it is the right key: the store file is what
            // is wrong (page 1 fails its HMAC, or another file was put in its place). Left as it is.
            throw StoreError.storeDamaged(path: configuration.path, cause: error)
        }
        try configuration.prepareSchema(database)
        if SecureFile.exists(files.creationMarker) {
            // The store exists with its schema: creation is complete.
            unlink(files.creationMarker)
            try SecureFile.syncDirectory(SecureFile.folder(containing: configuration.path))
        }
        // Writes sealed while the store was locked are applied now, before anything else sees the store.
        let inbox = LockedInbox(files: files)
        let (publicKey, privateKey) = try inbox.openKeyPair(storeKey: storeKey)
        let report: InboxMergeReport
        do {
            report = try inbox.merge(
                into: database, publicKey: publicKey, privateKey: privateKey, handlers: configuration.inboxHandlers)
        } catch {
            privateKey.wipe()
            throw error
        }
        return StoreCoordinator(
            database: database, configuration: configuration, inboxPublicKey: publicKey, inboxPrivateKey: privateKey,
            inboxReport: report)
    }

    /// The default schema: a key-value table, what the command-line tool's `put`/`get`/`delete` use.
    public static let prepareKeyValueSchema: @Sendable (Database) throws -> Void = { database in
        try database.execute("CREATE TABLE IF NOT EXISTS entries(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)")
    }

    // MARK: Access

    /// Whether the store is open.
    public var isOpen: Bool { database != nil }

    /// Runs `body` with the connection, for reads.
    ///
    /// - Parameter body: reads from the store; the connection must not escape it.
    /// - Returns: what `body` returned.
    /// - Throws: ``StoreError/Code/protectedDataUnavailable`` after the store closed, or what `body` throws.
    public func read<Result: Sendable>(_ body: @Sendable (Database) throws -> Result) throws -> Result {
        try body(try openDatabase())
    }

    /// Runs `body` in an immediate transaction: committed — durably — when it returns, rolled back when it throws.
    ///
    /// - Parameter body: writes to the store; the connection must not escape it.
    /// - Returns: what `body` returned.
    /// - Throws: ``StoreError/Code/protectedDataUnavailable`` after the store closed, what `body` throws, or
    ///   the commit's `SQLiteError`.
    public func write<Result: Sendable>(_ body: @Sendable (Database) throws -> Result) throws -> Result {
        let database = try openDatabase()
        return try database.transaction { try body(database) }
    }

    /// Closes the store after the work already queued on this actor: in-flight transactions finish first.
    /// The inbox private key is wiped with it.
    package func close() {
        database?.close()
        database = nil
        inboxPrivateKey?.wipe()
        inboxPrivateKey = nil
    }

    /// Merges what arrived in the locked inbox since the store attached.
    ///
    /// - Returns: what the merge applied, quarantined and found.
    /// - Throws: ``StoreError/Code/protectedDataUnavailable`` after the store closed; a failure to write the store.
    public func mergeInbox() throws -> InboxMergeReport {
        let (database, privateKey) = try openInbox()
        return try wrappingErrors {
            try inbox.merge(
                into: database, publicKey: inboxPublicKey, privateKey: privateKey, handlers: configuration.inboxHandlers)
        }
    }

    // MARK: Quarantine

    /// The inbox records that could not be applied and are kept, still sealed, in the store — oldest first.
    ///
    /// - Throws: ``StoreError/Code/protectedDataUnavailable`` after the store closed.
    public func quarantinedInboxRecords() throws -> [QuarantinedInboxRecord] {
        let database = try openDatabase()
        return try wrappingErrors {
            let ledger = InboxLedger(database: database)
            try ledger.prepare()
            return try ledger.quarantined()
        }
    }

    /// Tries to apply quarantined records again — after an app update brought a handler for their kind, or a
    /// migration made them fit — each in its own savepoint: those that apply leave the quarantine, the others
    /// stay with their new reason and one more attempt counted.
    ///
    /// - Parameter ids: the records to retry; all of them when `nil`.
    /// - Returns: which were merged and which stay quarantined.
    /// - Throws: ``StoreError/Code/protectedDataUnavailable`` after the store closed; a failure of the store
    ///   itself (nothing changed then).
    public func retryQuarantinedInboxRecords(_ ids: [InboxEntry.ID]? = nil) throws -> InboxMergeReport {
        let (database, privateKey) = try openInbox()
        return try wrappingErrors {
            let ledger = InboxLedger(database: database)
            var report = InboxMergeReport()
            try database.transaction {
                try ledger.prepare()
                for (id, sealed) in try ledger.sealed(ids) {
                    let opened = LockedInbox.openRecord(sealed, publicKey: inboxPublicKey, privateKey: privateKey)
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

    /// Removes quarantined records for good.
    ///
    /// - Parameter ids: the records to remove; all of them when `nil`.
    /// - Returns: how many were removed.
    /// - Throws: ``StoreError/Code/protectedDataUnavailable`` after the store closed.
    @discardableResult
    public func discardQuarantinedInboxRecords(_ ids: [InboxEntry.ID]? = nil) throws -> Int {
        let database = try openDatabase()
        return try wrappingErrors {
            let ledger = InboxLedger(database: database)
            try ledger.prepare()
            return try database.transaction { try ledger.discard(ids) }
        }
    }

    private func openInbox() throws -> (Database, SecureBytes) {
        let database = try openDatabase()
        guard let inboxPrivateKey else { throw StoreError.storeClosed() }
        return (database, inboxPrivateKey)
    }

    // MARK: Key-value conveniences

    /// Stores `value` under `key`, replacing what was there; durable when this returns.
    ///
    /// - Throws: a ``StoreError``; a failure of SQLite is its ``StoreError/cause``.
    public func put(_ key: String, _ value: String) throws {
        try wrappingErrors {
            try write { try $0.execute("INSERT OR REPLACE INTO entries(key, value) VALUES (?, ?)", [.text(key), .text(value)]) }
        }
    }

    /// The value stored under `key`, or `nil`.
    ///
    /// - Throws: a ``StoreError``; a failure of SQLite is its ``StoreError/cause``.
    public func value(forKey key: String) throws -> String? {
        try wrappingErrors { try read { try $0.scalar("SELECT value FROM entries WHERE key = ?", [.text(key)])?.string } }
    }

    /// Removes `key`; removing a missing key is not an error.
    ///
    /// - Throws: a ``StoreError``; a failure of SQLite is its ``StoreError/cause``.
    public func removeValue(forKey key: String) throws {
        try wrappingErrors { try write { try $0.execute("DELETE FROM entries WHERE key = ?", [.text(key)]) } }
    }

    /// Every key and value, ordered by key.
    ///
    /// - Throws: a ``StoreError``; a failure of SQLite is its ``StoreError/cause``.
    public func allEntries() throws -> [(key: String, value: String)] {
        try wrappingErrors {
            try read { database in
                try database.rows("SELECT key, value FROM entries ORDER BY key").map { ($0[0].string ?? "", $0[1].string ?? "") }
            }
        }
    }

    /// Runs one of the coordinator's own operations, reporting a lower layer's failure as a ``StoreError``.
    private func wrappingErrors<Result>(_ body: () throws -> Result) throws -> Result {
        do {
            return try body()
        } catch {
            throw StoreError(wrapping: error)
        }
    }

    private func openDatabase() throws -> Database {
        guard let database else { throw StoreError.storeClosed() }
        return database
    }
}
