package import DiskModel
public import EncryptedSQLite
public import SecureKeys

/// Which store to attach and how.
public struct StoreConfiguration: Sendable {
    /// The store's database file.
    ///
    /// The files beside it are named by ``files``.
    public var path: String
    /// When the store can be read (`ProtectionClass/complete` by default, like iOS's default for app files).
    public var protectionClass: ProtectionClass
    /// The SQLCipher connection settings.
    public var database: Database.Configuration
    /// The schema's migrations, applied at attach.
    ///
    /// They are applied before the locked inbox is merged, so merged records meet the current schema. The
    /// default is `DatabaseMigrator/keyValue` (the `entries` table). A migrator without it has it applied
    /// first all the same, so the key-value calls and the inbox's key-value records always find their table.
    public var migrator: DatabaseMigrator
    /// The most read-only connections open at once beside the writer (at least 1).
    ///
    /// Reads run on them, in parallel, and never wait for a write.
    public var maximumReaderCount: Int = 4
    /// How the records of the locked inbox are applied, by kind (``InboxHandlers/keyValue`` by default).
    public var inboxHandlers: InboxHandlers
    /// The largest the locked inbox file may grow, in bytes.
    ///
    /// The default is ``LockedInbox/defaultMaximumSize``, 256 MiB. An append that would pass it is refused
    /// with `StoreError.Code.inboxFull` and writes nothing.
    public var inboxMaximumSize: Int = LockedInbox.defaultMaximumSize
    /// A bug planted on purpose.
    ///
    /// Simulation only. The store acts on ``PlantedFault/mergeTruncatesUnread``.
    package var plantedFault: PlantedFault?
    /// A fault plan for the store's work on its own threads.
    ///
    /// Simulation only. The task's ``FaultPoint/plan`` does not reach that work. An example is
    /// ``FaultPoint/inboxMergeApplied``, where the process dies inside an inbox merge, before its transaction
    /// commits.
    package var faultPlan: FaultPoint.Plan?
    /// The file system the store's files are in: the real one outside simulation.
    ///
    /// It is the connections' (``database``'s), and every other file of the store (key file, inbox, creation
    /// marker, backups, rewrites) is written in it too.
    package var fileSystem: FileSystem {
        get { database.fileSystem }
        set { database.fileSystem = newValue }
    }

    /// A store at `path`.
    ///
    /// - Parameters:
    ///   - path: the database file.
    ///   - protectionClass: when the store can be read; a store keeps the class it was created with.
    ///   - database: the SQLCipher connection settings.
    ///   - migrator: the schema's migrations, applied at attach before the inbox merge.
    ///   - inboxHandlers: how the records of the locked inbox are applied, by kind.
    public init(
        path: String, protectionClass: ProtectionClass = .complete,
        database: Database.Configuration = Database.Configuration(),
        migrator: DatabaseMigrator = .keyValue,
        inboxHandlers: InboxHandlers = .keyValue
    ) {
        self.path = path
        self.protectionClass = protectionClass
        self.database = database
        self.migrator = migrator
        self.inboxHandlers = inboxHandlers
    }

    /// Every file of the store.
    ///
    /// These are the database, its journal, its key file and its locked inbox.
    public var files: StoreFiles { StoreFiles(database: path) }
}
