public import EncryptedSQLite
public import SecureKeys

/// Which store to attach and how.
public struct StoreConfiguration: Sendable {
    /// The store's database file; its key file is `<path>.key`.
    public var path: String
    /// When the store can be read (``ProtectionClass/complete`` by default, like iOS's default for app files).
    public var protectionClass: ProtectionClass
    /// The SQLCipher connection settings.
    public var database: Database.Configuration
    /// Creates or migrates the schema right after the store opens, inside the attach.
    public var prepareSchema: @Sendable (Database) throws -> Void
    /// Writes one locked-inbox entry into the store, inside the merge transaction.
    public var applyInboxEntry: @Sendable (Database, InboxEntry) throws -> Void

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

    /// Present from just before the store's key is created until the store exists with its schema; see
    /// ``StoreCoordinator/attach(_:keys:)``.
    var creationMarkerPath: String { path + ".creating" }
}
