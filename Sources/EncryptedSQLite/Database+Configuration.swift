public import SecureKeys
package import DiskModel

extension Database {
    /// How a connection is set up. The defaults are the store's.
    public struct Configuration: Sendable, Hashable {
        /// The database's format.
        ///
        /// It is every SQLCipher setting the file must be opened with, each set explicitly at open
        /// (``CipherSettings``). A store's is recorded in its key file. The default is format 1
        /// (`StoreFormat/sqlcipher3Raw4096`), the format of every store made so far.
        public var format: StoreFormat = .current
        /// SQLCipher's page size (`PRAGMA cipher_page_size`), the format's.
        ///
        /// 4096 was measured faster than SQLCipher 3's 1024 default (fewer HMACs and IVs per byte). A database
        /// must always be opened with the page size it was created with; a mismatch reads as a wrong key.
        /// Setting another size than 4096 makes ``format`` one no key file records, for the benchmarks'
        /// measurements only.
        public var pageSize: Int {
            get { format.pageSize }
            set { format = StoreFormat(sqlcipher3PageSize: newValue) }
        }
        /// The page cache's upper bound, in KiB (`PRAGMA cache_size = -N`).
        ///
        /// SQLite fills it as pages are read.
        ///
        /// A page served from the cache is already decrypted and authenticated, so reads that hit it cost
        /// exactly what they cost unencrypted (Benchmarks/BENCHMARKS.md: warm scans and point reads at 1.000×
        /// plaintext's instructions). 32 MiB holds the benchmarks' 100,000-row working set (8.5 MB); with
        /// SQLite's usual 8 MiB, a warm scan of it re-decrypted every page (1.95× plaintext).
        public var cacheSizeKiB: Int = 32768
        /// Write-ahead logging.
        ///
        /// Readers do not block the writer, and commits append instead of rewriting.
        public var usesWAL: Bool = true
        /// Open read-only.
        public var readOnly: Bool = false
        /// Create the file when it does not exist. Off, a missing file fails with `StoreError.Code.storeUnavailable`.
        public var createIfMissing: Bool = true
        /// How long to wait for another connection's lock, in milliseconds.
        public var busyTimeoutMilliseconds: Int = 5000
        /// When a commit reaches the disk (`PRAGMA synchronous`, WAL mode). ``Synchronous/full`` by default.
        public var synchronous: Synchronous = .full
        /// Whether a write-ahead log a crash left behind is checked for damage before SQLite recovers it.
        ///
        /// SQLite's recovery would take such damage for a torn write, silently dropping every transaction
        /// committed after a damaged frame. The open refuses with `StoreError.Code.storeDamaged` instead, every
        /// file left as it is. On by default. It runs only for a writer opened with ``Synchronous/full`` (with
        /// `NORMAL`, a power cut may tear several unsynced transactions, which is not damage) while no other
        /// connection, of this process or another, has the database open. It costs one read of the log, only
        /// when there is one. <doc:/SecureKeys/KeyFileFormats> says what it detects and what it cannot.
        public var checksWriteAheadLog: Bool = true
        /// Whether SQLite enforces `FOREIGN KEY` constraints (`PRAGMA foreign_keys`). On by default, as in GRDB.
        ///
        /// Set on every connection when it opens: the pragma is a no-op inside a transaction, and every write
        /// and migration of a store runs inside one. A violation fails the statement with
        /// `StoreError.Code.constraint` and the extended code 787 (`SQLITE_CONSTRAINT_FOREIGNKEY`).
        public var foreignKeysEnabled: Bool = true
        /// How many prepared statements the connection keeps for reuse.
        ///
        /// This covers ``Database/cachedStatement(_:)``, and every `execute`, `rows` and `scalar` with
        /// arguments. Past it the least recently used one is finalized. 0 keeps none, and every call prepares
        /// its statement afresh.
        ///
        /// 100 by default: the store's own statements (transactions, the key-value table, the inbox, the
        /// migrator's bookkeeping) are about 35 distinct SQL texts, and a record type adds up to nine, so an
        /// app's working set fits with room to spare, while an app that builds SQL text dynamically —
        /// `IN (?, ?, …)` lists of every length, values spliced into the text — no longer grows the connection
        /// without end: 20,000 distinct texts held 37–41 MB before there was a bound, 0.2 MB with it
        /// (`store-workload distinct-statements`, Benchmarks/). A simple statement holds about 2 KB, an
        /// `IN` list of 500 parameters about 65 KB. Raise it when a profile shows statements being prepared
        /// again and again in a loop over more distinct texts than this.
        public var statementCacheCapacity: Int = 100
        /// The file system the database's files are in.
        ///
        /// Outside simulation, the real one. A simulated disk's routes the files' changes to its model
        /// (``DiskModelVFS``).
        package var fileSystem: FileSystem = .real
        /// Whether the connection builds a new database that no one may use until ``Database/finishBuilding()``.
        ///
        /// In WAL mode only. Until then its rollback journal is in memory and nothing is synced — the cost of
        /// a new file's first pages through a journal on disk, four syncs, is spared — so a crash leaves a file
        /// that must be thrown away, which its builder (a store's creation, behind its marker) knows to do.
        package var buildsNewFile = false
        /// What runs on each new connection, in the order added.
        ///
        /// See ``prepareDatabase(_:)``.
        var preparations: [Preparation] = []

        /// Adds code that runs on every connection right after it opened.
        ///
        /// It runs with the key validated and the settings applied, before anything else uses the connection.
        /// That is the writer and each reader of a store, every time one opens (after a lock, a store reopens).
        /// It is for the app's own per-connection set-up, such as a pragma or a collation, as GRDB's
        /// `Configuration.prepareDatabase`.
        ///
        /// - Parameter body: the set-up; an error it throws fails the open (and so the store's attach) with it.
        public mutating func prepareDatabase(_ body: @escaping @Sendable (Database) throws -> Void) {
            preparations.append(Preparation(body))
        }

        /// One connection set-up.
        ///
        /// Two configurations are equal when they hold the same set-ups.
        struct Preparation: Sendable, Hashable {
            final class Body: Sendable {
                let run: @Sendable (Database) throws -> Void
                init(_ run: @escaping @Sendable (Database) throws -> Void) { self.run = run }
            }
            let body: Body
            init(_ run: @escaping @Sendable (Database) throws -> Void) { body = Body(run) }
            static func == (left: Self, right: Self) -> Bool { left.body === right.body }
            func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(body)) }
        }

        /// When a commit in WAL mode reaches the disk.
        public enum Synchronous: String, Sendable, Hashable {
            /// Every commit syncs the write-ahead log before it returns (`FULL`).
            ///
            /// A write that returned survives a power cut. This is the store's default, and what
            /// "acknowledged" means in its documentation.
            case full = "FULL"
            /// Commits do not sync, and the log is synced at checkpoints (`NORMAL`).
            ///
            /// It is faster for many small writes, as each commit saves an `fsync`, and the database stays
            /// consistent. But the last transactions acknowledged before a power cut (not a crash of the app,
            /// as the OS still has them) may be lost.
            case normal = "NORMAL"
        }

        /// The store's defaults.
        public init() {}
    }
}
