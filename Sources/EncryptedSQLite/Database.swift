internal import CSQLCipher
import Glibc
public import SecureKeys
import StoreConcurrency
import SystemPackage

/// A connection to an encrypted SQLite database (SQLCipher).
///
/// Opening keys the connection with a raw 32-byte key in SQLCipher's `x'…'` form, so no PBKDF2 runs (the
/// "Raw Key Data (Without Key Derivation)" form of `PRAGMA key`), and validates the key with a first read, so
/// a wrong key fails at open and not at the first query (as GRDB does). Between the key and that read it sets
/// every setting of the database's format (``Configuration/format``) as the linked SQLCipher spells them
/// (``CipherSettings``), so nothing depends on the library's defaults, which differ between SQLCipher 3 and 4.
/// The connection refuses to run on a library that is not SQLCipher.
///
/// Not `Sendable`: one owner (an actor, or a serial executor) uses a connection at a time.
public final class Database {
    /// The database file.
    public let path: String
    /// The configuration it was opened with.
    public let configuration: Configuration
    /// The SQLCipher version the library reports (`PRAGMA cipher_version`).
    public private(set) var cipherVersion: String = ""
    /// The format settings the connection was opened with, on the linked library.
    ///
    /// It is `nil` for the benchmarks' unencrypted baseline.
    public private(set) var cipherSettings: CipherSettings?

    /// The SQLCipher the process is linked with, read once.
    ///
    /// It is read with `PRAGMA cipher_version` on an in-memory connection. It is `nil` when the linked SQLite
    /// is not SQLCipher, or reports a version that does not parse.
    public static let linkedSQLCipher: SQLCipherVersion? = {
        var connection: OpaquePointer?
        defer { sqlite3_close_v2(connection) }
        guard sqlite3_open_v2(":memory:", &connection, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK
        else { return nil }
        var statement: OpaquePointer?
        defer { sqlite3_finalize(statement) }
        guard sqlite3_prepare_v2(connection, "PRAGMA cipher_version", -1, &statement, nil) == SQLITE_OK,
            sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0)
        else { return nil }
        return SQLCipherVersion(reported: String(cString: text))
    }()

    private(set) var handle: OpaquePointer?
    private var cachedStatements: StatementCache
    /// How many ``transaction(_:_:)`` bodies are running.
    ///
    /// It is one, or none, as transactions do not nest.
    var transactionBodies = 0
    /// How many ``transaction(_:_:)`` bodies have started.
    ///
    /// The running one's number tells a cursor's transaction from a later one.
    var startedTransactions = 0
    /// The cursors opened in the running transaction body, ended with it (``DatabaseCursor``).
    var transactionCursors: [CursorState] = []
    private let hooks = ConnectionHooks()
    /// The file this connection counts as open in ``openFiles``, once it is open.
    private var registeredFile: String?

    /// How many connections of this process have each database file open, by its resolved path.
    ///
    /// A write-ahead log is only checked when none does, since an open one is live, not left by a crash.
    private static let openFiles = LockedState<[String: Int]>([:])

    /// Opens (or creates) the database at `path` with `key`.
    ///
    /// This is the store's own open (`StoreCoordinator`), its readers', and this package's tests'. It is not
    /// public. An app opens its store through `StoreConfiguration`, and a file of its own choosing only
    /// through ``init(openingUntrustedFileAt:key:configuration:)``, whose name says what that exposes.
    ///
    /// - Parameters:
    ///   - path: the database file.
    ///   - key: the 32-byte store key.
    ///   - configuration: see ``Configuration``.
    /// - Throws: `StoreError.Code.wrongKey` when `key` does not decrypt the file (the file is untouched; the
    ///   message names the format and the library it was opened as), `StoreError.Code.storeUnavailable` when
    ///   the file cannot be opened or the linked SQLCipher cannot read the format, `StoreError.Code.notSQLCipher`;
    ///   before SQLite opens anything, `StoreError.Code.ioError` when the file or one SQLite opens beside it
    ///   (`-wal`, `-shm`, `-journal`) is a symbolic link, a FIFO or anything else that is not a regular file, and
    ///   `StoreError.Code.storeDamaged` for a store file shorter than its first page beside its key file (see
    ///   `checkFiles(ofDatabaseAt:pageSize:)`).
    package convenience init(path: String, key: SecureBytes, configuration: Configuration = Configuration()) throws {
        guard key.count == 32 else {
            throw StoreError(code: .misuse, message: "a store key is 32 bytes, got \(key.count)", path: path)
        }
        try self.init(path: path, keying: .raw(key), configuration: configuration)
    }

    /// Opens (or creates) an encrypted database at a path of the caller's choosing.
    ///
    /// It is keyed with a raw 32-byte key. The file is one the store did not make, such as an export, another
    /// program's database, or a benchmark's.
    ///
    /// **What this exposes.** The engine is Debian bookworm's SQLCipher 3.4.1 (SQLite 3.15.2, 2016), which
    /// carries no patch for a recorded CVE and compiles in FTS3 and RTREE: CVE-2018-20346 (FTS3 shadow-table
    /// integer overflow, "Magellan") and CVE-2019-8457 (RTREE out-of-bounds read), among others, are memory
    /// corruption reachable from a database file crafted by an attacker. SQLCipher authenticates every page
    /// before SQLite parses it, so a file is only dangerous when whoever crafted it also knows `key`: never
    /// pass a file *and* its key that came from outside (an "import" of a file a user was sent, with the key
    /// or passphrase sent beside it). The store's own files never go through this initializer
    /// (`StoreCoordinator` opens them with the key its key file wraps). <doc:/SecureKeys/KeyFileFormats>, *Threat model*, says
    /// how to build against a newer SQLCipher.
    ///
    /// - Parameters:
    ///   - path: the database file.
    ///   - key: its 32-byte raw key (SQLCipher's `x'…'` form: no key derivation).
    ///   - configuration: see ``Configuration``; ``Configuration/format`` must be the file's.
    /// - Throws: as the store's open: `StoreError.Code.wrongKey` when `key` (or the format) does not open the
    ///   file, `StoreError.Code.storeUnavailable`, `StoreError.Code.notSQLCipher`, `StoreError.Code.misuse` for a
    ///   key that is not 32 bytes.
    public convenience init(
        openingUntrustedFileAt path: String, key: SecureBytes, configuration: Configuration = Configuration()
    ) throws {
        try self.init(path: path, key: key, configuration: configuration)
    }

    /// Opens (or creates) a database keyed by a passphrase.
    ///
    /// SQLCipher 3 stretches the passphrase with PBKDF2-HMAC-SHA1 (64,000 iterations) on every open. It is
    /// for databases made by other SQLCipher programs, and the baseline the raw-key open is measured against.
    /// The store itself never uses it.
    ///
    /// **What this exposes**: a database made by another program is a file the store did not write, parsed by
    /// SQLite 3.15.2 with FTS3 and RTREE compiled in (CVE-2018-20346, CVE-2019-8457 and others: memory
    /// corruption from a crafted file); see ``init(openingUntrustedFileAt:key:configuration:)``. Open only files
    /// whose passphrase did not come with them from someone else.
    ///
    /// - Throws: as ``init(openingUntrustedFileAt:key:configuration:)``.
    public convenience init(
        openingUntrustedFileAt path: String, passphrase: SecureBytes, configuration: Configuration = Configuration()
    ) throws {
        try self.init(path: path, keying: .passphrase(passphrase), configuration: configuration)
    }

    /// Opens (or creates) an **unencrypted** SQLite database.
    ///
    /// It is the baseline the encrypted store is measured against in `Benchmarks/`, and nothing else. It
    /// parses whatever file is at `path`, authenticated by nothing (see
    /// ``init(openingUntrustedFileAt:key:configuration:)`` for what that exposes on SQLite 3.15.2).
    ///
    /// Behind the `Baseline` SPI so an app cannot reach it by accident: the store never calls it, and
    /// `import EncryptedSQLite` alone does not show it. The page size is set with `PRAGMA page_size` (the
    /// plaintext counterpart of `cipher_page_size`); every other setting is the encrypted store's.
    @_spi(Baseline)
    public convenience init(unencryptedPath path: String, configuration: Configuration = Configuration()) throws {
        try self.init(path: path, keying: .none, configuration: configuration)
    }

    /// How the connection is keyed.
    private enum Keying {
        /// A raw 32-byte key, passed as `x'…'`.
        ///
        /// There is no key derivation.
        case raw(SecureBytes)
        /// A passphrase SQLCipher derives the key from.
        case passphrase(SecureBytes)
        /// No key, for the benchmarks' baseline only.
        ///
        /// This is plain SQLite.
        case none

    }

    private init(path: String, keying: Keying, configuration: Configuration) throws {
        self.path = path
        self.configuration = configuration
        cachedStatements = StatementCache(capacity: configuration.statementCacheCapacity)
        var flags = SQLITE_OPEN_NOMUTEX
        flags |= configuration.readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE
        if configuration.createIfMissing && !configuration.readOnly { flags |= SQLITE_OPEN_CREATE }
        var connection: OpaquePointer?
        // Before anything opens a file of the database (the log check below, SQLite): each is what it should be.
        try Self.checkFiles(ofDatabaseAt: path, pageSize: configuration.pageSize)
        let isNewFile = !SecureFile.exists(path)
        if !isNewFile && configuration.checksWriteAheadLog && configuration.usesWAL && !configuration.readOnly
            && configuration.synchronous == .full
        {
            try Self.checkWriteAheadLog(ofDatabaseAt: path, pageSize: configuration.pageSize)
        }
        // In simulation, a store on a simulated disk is opened through the VFS that reports to it.
        let code = sqlite3_open_v2(path, &connection, flags, DiskModelVFS.name(forOpening: path, in: configuration.fileSystem))
        // sqlite3_open_v2 returns a handle even on failure; it must be closed either way.
        handle = connection
        guard code == SQLITE_OK, connection != nil else {
            let message = connection.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            close()
            throw StoreError(resultCode: code, message: message, path: path)
        }
        let file = Self.resolved(path)
        registeredFile = file
        Self.openFiles.withLock { $0[file, default: 0] += 1 }
        // A new store is private to its owner, like its key file; SQLite gives the -wal and -shm files the
        // database file's permissions, so this must happen before the journal mode is set.
        if isNewFile && SecureFile.exists(path) { chmod(path, 0o600) }
        // Before the first read: another connection (a closing one checkpointing, an extension writing) may
        // hold a lock for a moment, and the validation read must wait for it rather than fail with `busy`.
        sqlite3_busy_timeout(connection, Int32(configuration.busyTimeoutMilliseconds))
        // Extended result codes tell a foreign-key failure from a unique one, a failed fsync from a failed
        // write; `StoreError.extendedResultCode` carries them, `StoreError.code` still groups them.
        sqlite3_extended_result_codes(connection, 1)
        hooks.install(on: connection!)
        do {
            try checkSQLCipher()
            try applyKey(keying)
            if case .none = keying {
                try execute("PRAGMA page_size = \(configuration.pageSize)")
            } else {
                try applyCipherSettings()
            }
            // The first read validates the key: SQLCipher decrypts and authenticates page 1 here.
            do {
                try execute("SELECT count(*) FROM sqlite_master")
            } catch var error as StoreError where [StoreError.Code.wrongKey, .storeDamaged].contains(error.code) {
                // Which settings were tried tells a wrong key from a store of another format or library.
                if let cipherSettings { error.message += " (opened as \(cipherSettings))" }
                throw error
            }
            // Temporary tables and indices stay in memory, never in a file outside the store.
            try execute("PRAGMA temp_store = MEMORY")
            try execute("PRAGMA cache_size = -\(configuration.cacheSizeKiB)")
            if configuration.usesWAL && !configuration.readOnly {
                if configuration.buildsNewFile {
                    guard isNewFile else {
                        throw StoreError(code: .misuse, message: "only a new file is built without a journal on disk", path: path)
                    }
                    try execute("PRAGMA journal_mode = MEMORY")
                    try execute("PRAGMA synchronous = OFF")
                } else {
                    try execute("PRAGMA journal_mode = WAL")
                    try execute("PRAGMA synchronous = \(configuration.synchronous.rawValue)")
                }
            }
            try execute("PRAGMA foreign_keys = \(configuration.foreignKeysEnabled ? "ON" : "OFF")")
            for preparation in configuration.preparations { try preparation.body.run(self) }
        } catch let error as StoreError where error.code == .storeUnavailable && Self.isOnReadOnlyFileSystem(path) {
            // SQLite says only "unable to open database file": in WAL mode it must create and write the -shm
            // and -wal files beside the store, which a read-only file system refuses. Say that.
            close()
            throw StoreError(
                code: .readOnly,
                message: "the store's folder is on a read-only file system; the store must write its journal beside it",
                path: path, extendedResultCode: error.extendedResultCode)
        } catch {
            close()
            throw error
        }
    }

    /// Makes the new file this connection built (``Configuration/buildsNewFile``) durable and puts it in WAL mode.
    ///
    /// The switch to WAL rewrites page 1 in a commit that syncs the file, and every page written before with
    /// it: one sync. Then commits are synced as ``Configuration/synchronous`` says, and the log is opened (which
    /// creates it). Syncing the folder, so that the file's name and the log's survive a crash, is the builder's.
    ///
    /// - Throws: `StoreError.Code.misuse` on a connection that builds nothing; the switch's `StoreError`.
    package func finishBuilding() throws {
        guard configuration.buildsNewFile, configuration.usesWAL, !configuration.readOnly else {
            throw StoreError(code: .misuse, message: "this connection builds no new file", path: path)
        }
        try execute("PRAGMA synchronous = FULL")
        // Stepped to its end, not only to its row: the switch's commit (a write, a sync) runs when the statement
        // ends, and its failure must be thrown, not dropped by a reset.
        let switchToWAL = try prepare("PRAGMA journal_mode = WAL")
        var mode: String?
        while try switchToWAL.step() { mode = switchToWAL.value(at: 0).string }
        guard mode == "wal" else {
            throw StoreError(code: .misuse, message: "the new file could not be put in WAL mode (journal mode \(mode ?? "none"))", path: path)
        }
        if configuration.synchronous != .full { try execute("PRAGMA synchronous = \(configuration.synchronous.rawValue)") }
        // A read opens the log, which creates it: its name is then in the folder before the builder syncs it.
        try execute("SELECT count(*) FROM sqlite_master")
    }

    /// Checks the files SQLite opens for the database at `path` before it opens any.
    ///
    /// These are the database, its write-ahead log and shared-memory index, and its rollback journal. Each
    /// must be a regular file or absent. SQLite follows a link (and then keeps the log beside the link's
    /// target, not beside the store) and blocks for ever on a FIFO. Nothing is opened to find out
    /// (``SecureFile/regularFileSize(at:)``).
    ///
    /// Here, the one place every connection opens, rather than in the `protected-store-disk` VFS: an app opens
    /// its store with SQLite's default VFS, which that VFS only wraps in simulation, and the default VFS opens
    /// the shared-memory index itself, without an `xOpen`.
    ///
    /// A store's file is also refused when it is shorter than one page (`pageSize`) while its key file exists
    /// and its creation is finished (no creation marker, or the inbox key file a first attach makes): that
    /// store existed, and SQLite would take the empty or cut file for a new database and write a fresh header
    /// into it — every value gone, no error. A store being created starts empty; its marker says so.
    ///
    /// - Throws: `StoreError.Code.ioError` naming the file and what is there instead of a regular file;
    ///   `StoreError.Code.storeDamaged` for a store file cut shorter than a page. Nothing is changed on disk.
    private static func checkFiles(ofDatabaseAt path: String, pageSize: Int) throws {
        let size: Int?
        do {
            size = try SecureFile.regularFileSize(at: path)
            for sideFile in [path + "-wal", path + "-shm", path + "-journal"] {
                _ = try SecureFile.regularFileSize(at: sideFile)
            }
        } catch {
            throw storeError(from: error)
        }
        let files = StoreFiles(database: path)
        guard let size, size < pageSize, SecureFile.exists(files.key),
            !SecureFile.exists(files.creationMarker) || SecureFile.exists(files.inboxKey)
        else { return }
        throw StoreError(
            code: .storeDamaged,
            message: "the store file is \(size) bytes, shorter than its first page (\(pageSize) bytes): it was emptied or cut short. Its key file \(files.key) shows that the store existed, so it is not opened as a new, empty store; it was left as it is",
            path: path)
    }

    /// Whether the file system holding `path`'s folder is mounted read-only.
    private static func isOnReadOnlyFileSystem(_ path: String) -> Bool {
        var info = statvfs()
        return statvfs(SecureFile.folder(containing: path), &info) == 0 && info.f_flag & UInt(ST_RDONLY) != 0
    }

    deinit {
        close()
    }

    /// Whether the connection is open.
    public var isOpen: Bool { handle != nil }

    /// Closes the connection.
    ///
    /// Later calls throw `StoreError.Code.closed`. Closing twice is harmless.
    public func close() {
        cachedStatements.removeAll()
        guard let handle else { return }
        ConnectionHooks.uninstall(from: handle)
        // sqlite3_close_v2 defers the close until every statement is finalised.
        sqlite3_close_v2(handle)
        self.handle = nil
        if let registeredFile {
            Self.openFiles.withLock { counts in
                counts[registeredFile, default: 1] -= 1
                if counts[registeredFile] == 0 { counts[registeredFile] = nil }
            }
            self.registeredFile = nil
        }
    }

    /// Refuses to open a database whose write-ahead log SQLite's recovery would cut short at a damaged frame,
    /// dropping transactions committed after it (``Configuration/checksWriteAheadLog``). A log that another
    /// connection has open, of this process or another, is live, and left alone.
    ///
    /// - Throws: `StoreError.Code.storeDamaged` naming the log, the frame and its byte offset;
    ///   `StoreError.Code.storeUnavailable` when the log cannot be read.
    private static func checkWriteAheadLog(ofDatabaseAt path: String, pageSize: Int) throws {
        let file = resolved(path)
        guard openFiles.withLock({ $0[file] == nil }), !WriteAheadLogCheck.isOpenInAnotherProcess(databaseAt: path) else {
            return
        }
        let logPath = path + "-wal"
        guard let damage = try WriteAheadLogCheck(path: logPath, expectedPageSize: pageSize).findDamage() else { return }
        throw StoreError(
            code: .storeDamaged,
            message: "the write-ahead log is damaged at \(damage.place): it fails its checksum, yet \(damage.committedTransactions) commits verify after it, so SQLite's recovery would silently drop transactions that were committed. The store was not opened; the store file and its log were left as they are",
            path: logPath)
    }

    /// Whether a connection has the database at `path` open.
    ///
    /// It may be one of this process (counted), or of another (its lock on the `-shm` index). A rewrite of the
    /// store refuses then.
    package static func isOpenByAnyConnection(_ path: String) -> Bool {
        let file = resolved(path)
        return openFiles.withLock { $0[file] != nil } || WriteAheadLogCheck.isOpenInAnotherProcess(databaseAt: path)
    }

    /// `path` with its links and `.`/`..` resolved, so two spellings of one file count as one.
    ///
    /// It is `path` itself when it cannot be resolved.
    private static func resolved(_ path: String) -> String {
        guard let pointer = realpath(path, nil) else { return path }
        defer { free(pointer) }
        return String(cString: pointer)
    }

    // MARK: Statements

    /// Prepares `sql` (one statement).
    public func prepare(_ sql: String) throws -> Statement {
        try checkTransactionNotAborted()
        return try Statement(sql: sql, databaseHandle: try openHandle(), path: path, hooks: hooks)
    }

    /// A prepared statement for `sql`, reused from the connection's cache when it holds one.
    ///
    /// The cache keeps the ``Configuration/statementCacheCapacity`` most recently used statements; a
    /// statement it drops is finalized once nobody holds it, so one handed out stays valid for as long as
    /// the caller keeps it. Two callers asking for the same SQL get the same statement: finish with one
    /// (step it to the end, or ``Statement/reset()``) before running the same SQL again. The one exception is a
    /// statement an open ``DatabaseCursor`` steps through: the caller then gets a statement of its own.
    public func cachedStatement(_ sql: String) throws -> Statement {
        try checkTransactionNotAborted()
        if let statement = cachedStatements.statement(for: sql) {
            // An open cursor steps through that one: a statement of its own, uncached, for this caller.
            return statement.isHeldByCursor ? try prepare(sql) : statement
        }
        let statement = try prepare(sql)
        cachedStatements.insert(statement, for: sql)
        return statement
    }

    /// How many prepared statements the cache holds (for tests).
    package var cachedStatementCount: Int { cachedStatements.count }

    /// Whether the cache holds a statement for `sql`, without counting as a use (for tests).
    package func cachesStatement(_ sql: String) -> Bool { cachedStatements.contains(sql) }

    /// Runs one or more statements separated by semicolons, without arguments.
    public func execute(_ sql: String) throws {
        let connection = try openHandle()
        var errorMessage: UnsafeMutablePointer<CChar>?
        hooks.willCompile()
        let code = sqlite3_exec(connection, sql, nil, nil, &errorMessage)
        hooks.compiledStatementsRan(inTransaction: sqlite3_get_autocommit(connection) == 0)
        defer { sqlite3_free(errorMessage) }
        guard code == SQLITE_OK else {
            let message = errorMessage.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(connection))
            throw StoreError(
                resultCode: code, message: message, sql: sql, path: path, systemErrno: sqlite3_system_errno(connection))
        }
    }

    /// Runs one statement with `arguments`, reusing its prepared form (``cachedStatement(_:)``).
    ///
    /// The arguments are for example `[id, title]` or `["id": id, "title": title]`.
    public func execute(_ sql: String, _ arguments: StatementArguments) throws {
        try cachedStatement(sql).execute(arguments)
    }

    /// Runs one statement with `values`, reusing its prepared form.
    public func execute(_ sql: String, _ values: [DatabaseValue]) throws {
        try cachedStatement(sql).execute(values)
    }

    /// Runs one statement with `values`, the text at `position` (1-based) read in place from `text` rather
    /// than copied (see `Statement.execute(_:borrowingText:at:)`).
    package func execute(_ sql: String, _ values: [DatabaseValue], borrowingText text: UnsafeRawBufferPointer, at position: Int) throws {
        try cachedStatement(sql).execute(values, borrowingText: text, at: position)
    }

    /// Runs one query with `arguments` and returns its rows.
    public func rows(_ sql: String, _ arguments: StatementArguments = []) throws -> [Row] {
        try cachedStatement(sql).rows(arguments)
    }

    /// Runs one query with `values` and returns its rows.
    public func rows(_ sql: String, _ values: [DatabaseValue]) throws -> [Row] {
        try cachedStatement(sql).rows(values)
    }

    /// The first column of the first row, or `nil` when there is no row.
    public func scalar(_ sql: String, _ arguments: StatementArguments = []) throws -> DatabaseValue? {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        return try firstValue(of: statement)
    }

    /// The first column of the first row, or `nil` when there is no row.
    public func scalar(_ sql: String, _ values: [DatabaseValue]) throws -> DatabaseValue? {
        let statement = try cachedStatement(sql)
        try statement.bind(values)
        return try firstValue(of: statement)
    }

    private func firstValue(of statement: Statement) throws -> DatabaseValue? {
        defer { statement.reset() }
        return try statement.step() ? statement.value(at: 0) : nil
    }

    /// The number of rows the last finished `INSERT`, `UPDATE` or `DELETE` changed (`sqlite3_changes`).
    public var changes: Int {
        handle.map { Int(sqlite3_changes($0)) } ?? 0
    }

    /// The rowid of the last row inserted on this connection (`sqlite3_last_insert_rowid`).
    ///
    /// It is an `INTEGER PRIMARY KEY` column's value when the table has one, and 0 before any insert.
    public var lastInsertedRowID: Int64 {
        handle.map { sqlite3_last_insert_rowid($0) } ?? 0
    }

    // MARK: Observation

    /// Runs `body` and returns, with its result, the tables its queries read.
    ///
    /// Observations use it, as a commit that writes none of them cannot change the result.
    package func trackingReads<Result>(_ body: () throws -> Result) rethrows -> (Result, TableRegion) {
        hooks.startTrackingReads()
        do {
            let result = try body()
            return (result, hooks.stopTrackingReads())
        } catch {
            _ = hooks.stopTrackingReads()
            throw error
        }
    }

    /// The tables written by the transactions that committed on this connection since the last call.
    package func takeCommittedWrites() -> TableRegion {
        hooks.takeCommittedWrites()
    }

    // MARK: Keys and integrity

    /// Re-encrypts the database under `newKey` (`sqlite3_rekey` with the raw-key form).
    ///
    /// It then checks the result on a connection of its own. The file must open with `newKey` and pass
    /// `integrity_check`.
    ///
    /// SQLCipher 3 rewrites every page in one transaction; in WAL mode the journal is switched to DELETE for
    /// the rewrite and back afterwards, since a rekey must not leave pages under the old key in the WAL.
    /// Not public: SQLCipher 3.4.1's `sqlite3_rekey_v2` returns `SQLITE_OK` whatever its commit did, so a write
    /// or fsync that fails part-way leaves a file whose pages are under both keys while the call says done. The
    /// check turns that into an error, but cannot undo it; the store's key never changes in this library (a
    /// passcode change re-wraps class keys, a `migrate` or a restore writes a new file and swaps it in).
    ///
    /// - Throws: `StoreError.Code.storeDamaged` when the rewritten file does not open whole with `newKey`.
    package func rekey(to newKey: SecureBytes) throws {
        guard newKey.count == 32 else {
            throw StoreError(code: .misuse, message: "a store key is 32 bytes, got \(newKey.count)", path: path)
        }
        let connection = try openHandle()
        let wal = configuration.usesWAL && !configuration.readOnly
        if wal { try execute("PRAGMA journal_mode = DELETE") }
        let code = try Self.withRawKeyLiteral(newKey) { literal in
            sqlite3_rekey_v2(connection, "main", literal.baseAddress, Int32(literal.count))
        }
        guard code == SQLITE_OK else {
            throw StoreError(
                resultCode: code, message: String(cString: sqlite3_errmsg(connection)), path: path,
                systemErrno: sqlite3_system_errno(connection))
        }
        // SQLITE_OK says nothing about the commit: read every page back from the file, under the new key.
        var check = configuration
        check.readOnly = true
        check.createIfMissing = false
        check.usesWAL = false
        let findings: [String]
        do {
            let reopened = try Database(path: path, key: newKey, configuration: check)
            defer { reopened.close() }
            findings = try reopened.integrityCheck()
        } catch {
            throw StoreError(
                code: .storeDamaged,
                message: "the rekey did not complete: SQLCipher reported success, but the file does not open with the new key (\((error as? StoreError).map { "\($0.code)" } ?? "\(type(of: error))")); a write failed part-way, and its pages may be under both keys",
                path: path)
        }
        guard findings == ["ok"] else {
            throw StoreError(
                code: .storeDamaged,
                message: "the rekey did not complete: SQLCipher reported success, but the file fails integrity_check under the new key (\(findings.prefix(3).joined(separator: "; ")))",
                path: path)
        }
        if wal { try execute("PRAGMA journal_mode = WAL") }
    }

    /// Runs `PRAGMA integrity_check`, which reads every page of every b-tree, so SQLCipher authenticates each
    /// page's HMAC on the way (SQLCipher 3.4 has no `cipher_integrity_check`).
    ///
    /// - Returns: `["ok"]` for a sound database, otherwise SQLite's findings.
    /// - Throws: `StoreError.Code.storeDamaged` when a page fails its HMAC.
    public func integrityCheck() throws -> [String] {
        try rows("PRAGMA integrity_check").compactMap { $0[0].string }
    }

    /// Copies the write-ahead log into the database file (`PRAGMA wal_checkpoint(TRUNCATE)`).
    public func checkpoint() throws {
        if configuration.usesWAL { try execute("PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    // MARK: Private

    private func openHandle() throws -> OpaquePointer {
        guard let handle else { throw StoreError(code: .closed, message: "the database is closed", path: path) }
        return handle
    }

    /// Refuses plain SQLite.
    ///
    /// With it, `PRAGMA key` is ignored and data would be written in the clear.
    private func checkSQLCipher() throws {
        let version = try rows("PRAGMA cipher_version").first?[0].string
        guard let version, !version.isEmpty else {
            throw StoreError(
                code: .notSQLCipher,
                message: "the linked SQLite library is not SQLCipher (PRAGMA cipher_version returned nothing); refusing to store data unencrypted",
                path: path)
        }
        cipherVersion = version
        cachedStatements.removeAll()
    }

    /// Sets every setting of the configuration's format, as the linked SQLCipher spells them
    /// (``CipherSettings``), between the key and the first read.
    ///
    /// - Throws: `StoreError.Code.storeUnavailable` when the linked library cannot read the format, or
    ///   reports a version that does not parse.
    private func applyCipherSettings() throws {
        guard let library = SQLCipherVersion(reported: cipherVersion) else {
            throw StoreError(
                code: .storeUnavailable,
                message: "the linked SQLCipher reports version \"\(cipherVersion)\", which does not parse: cannot tell which settings open \(configuration.format)",
                path: path)
        }
        let settings: CipherSettings
        do {
            settings = try CipherSettings(format: configuration.format, library: library)
        } catch var error as StoreError {
            error.path = path
            throw error
        }
        for pragma in settings.pragmas { try execute(pragma) }
        cipherSettings = settings
    }

    private func applyKey(_ keying: Keying) throws {
        let connection = try openHandle()
        let key = { (bytes: UnsafeRawBufferPointer) in
            sqlite3_key_v2(connection, "main", bytes.baseAddress, Int32(bytes.count))
        }
        let code =
            switch keying {
            case .raw(let rawKey): try Self.withRawKeyLiteral(rawKey, key)
            case .passphrase(let passphrase): try passphrase.withUnsafeBytes(key)
            case .none: SQLITE_OK  // nothing to key
            }
        guard code == SQLITE_OK else {
            throw StoreError(resultCode: code, message: String(cString: sqlite3_errmsg(connection)), path: path)
        }
    }

    /// Calls `body` with SQLCipher's raw-key literal `x'<64 hex digits>'`, built in guarded memory.
    ///
    /// With `salt`, it is the form that also sets a new database's 16-byte salt,
    /// `x'<64 hex digits of key><32 hex digits of salt>'` ("Raw Key Data With Explicit Salt"). The literal is
    /// wiped afterwards, so the key never passes through a Swift `String`.
    static func withRawKeyLiteral<Result>(
        _ key: SecureBytes, salt: [UInt8]? = nil, _ body: (UnsafeRawBufferPointer) throws -> Result
    ) throws -> Result {
        let saltCount = salt?.count ?? 0
        let literal = try SecureBytes(count: 3 + 2 * key.count + 2 * saltCount)
        defer { literal.wipe() }
        let digits: StaticString = "0123456789abcdef"
        try key.withUnsafeBytes { keyBytes in
            try literal.withUnsafeMutableBytes { out in
                out[0] = UInt8(ascii: "x")
                out[1] = UInt8(ascii: "'")
                digits.withUTF8Buffer { hex in
                    for (index, byte) in keyBytes.enumerated() {
                        out[2 + 2 * index] = hex[Int(byte >> 4)]
                        out[3 + 2 * index] = hex[Int(byte & 0x0f)]
                    }
                    for (index, byte) in (salt ?? []).enumerated() {
                        out[2 + 2 * keyBytes.count + 2 * index] = hex[Int(byte >> 4)]
                        out[3 + 2 * keyBytes.count + 2 * index] = hex[Int(byte & 0x0f)]
                    }
                }
                out[out.count - 1] = UInt8(ascii: "'")
            }
        }
        return try literal.withUnsafeBytes(body)
    }
}

@available(*, unavailable)
extension Database: Sendable {}
