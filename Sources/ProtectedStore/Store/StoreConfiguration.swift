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
    /// How the records of the locked inbox are applied, by kind (``InboxHandlers/keyValue`` by default).
    public var inboxHandlers: InboxHandlers

    /// A store at `path`.
    ///
    /// - Parameters:
    ///   - path: the database file.
    ///   - protectionClass: when the store can be read; a store keeps the class it was created with.
    ///   - database: the SQLCipher connection settings.
    ///   - prepareSchema: creates or migrates the schema after the store opens, inside the attach.
    ///   - inboxHandlers: how the records of the locked inbox are applied, by kind.
    public init(
        path: String, protectionClass: ProtectionClass = .complete,
        database: Database.Configuration = Database.Configuration(),
        prepareSchema: @escaping @Sendable (Database) throws -> Void = StoreCoordinator.prepareKeyValueSchema,
        inboxHandlers: InboxHandlers = .keyValue
    ) {
        self.path = path
        self.protectionClass = protectionClass
        self.database = database
        self.prepareSchema = prepareSchema
        self.inboxHandlers = inboxHandlers
    }

    /// Every file of the store: the database, its journal, its key file, its locked inbox.
    public var files: StoreFiles { StoreFiles(database: path) }
}
