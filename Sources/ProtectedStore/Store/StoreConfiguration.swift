public import EncryptedSQLite
public import SecureKeys

/// Which store to attach and how.
public struct StoreConfiguration: Sendable {
    /// The store's database file; the files beside it are named by ``files``.
    public var path: String
    /// When the store can be read (``ProtectionClass/complete`` by default, like iOS's default for app files).
    public var protectionClass: ProtectionClass
    /// The SQLCipher connection settings.
    public var database: Database.Configuration
    /// Creates or migrates the schema right after the store opens, inside the attach.
    public var prepareSchema: @Sendable (Database) throws -> Void
    /// Writes one locked-inbox entry into the store, inside the merge transaction.
    public var applyInboxEntry: @Sendable (Database, InboxEntry) throws -> Void

    /// A store at `path`.
    ///
    /// - Parameters:
    ///   - path: the database file.
    ///   - protectionClass: when the store can be read; a store keeps the class it was created with.
    ///   - database: the SQLCipher connection settings.
    ///   - prepareSchema: creates or migrates the schema after the store opens, inside the attach.
    ///   - applyInboxEntry: writes one locked-inbox entry into the store, inside the merge transaction.
    public init(
        path: String, protectionClass: ProtectionClass = .complete,
        database: Database.Configuration = Database.Configuration(),
        prepareSchema: @escaping @Sendable (Database) throws -> Void = StoreCoordinator.prepareKeyValueSchema,
        applyInboxEntry: @escaping @Sendable (Database, InboxEntry) throws -> Void = StoreCoordinator.applyKeyValueEntry
    ) {
        self.path = path
        self.protectionClass = protectionClass
        self.database = database
        self.prepareSchema = prepareSchema
        self.applyInboxEntry = applyInboxEntry
    }

    /// Every file of the store: the database, its journal, its key file, its locked inbox.
    public var files: StoreFiles { StoreFiles(database: path) }
}
