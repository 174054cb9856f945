/// Every file that belongs to one store, named in one place.
///
/// A store is more than its database: SQLite's write-ahead log and shared-memory index beside it, the key
/// file that holds its wrapped store key, the locked inbox of writes sealed while it could not be opened, the
/// inbox's key file, and a marker that exists only while the store is being created. Back up, move or delete
/// them together; never one without the others (a store without its key file cannot be read, ever).
public struct StoreFiles: Sendable, Hashable {
    /// The database file.
    public let database: String

    /// The files of the store whose database is at `database`.
    public init(database: String) { self.database = database }

    /// SQLite's write-ahead log (`<store>-wal`).
    public var writeAheadLog: String { database + "-wal" }
    /// SQLite's shared-memory index of the log (`<store>-shm`).
    public var sharedMemory: String { database + "-shm" }
    /// The store key, wrapped by its protection class's key.
    ///
    /// The file is `<store>.key` (<doc:KeyFileFormats>).
    public var key: String { database + ".key" }
    /// Writes sealed while the store could not be opened (`<store>.inbox`).
    public var inbox: String { database + ".inbox" }
    /// The inbox key pair (`<store>.inbox-key`).
    ///
    /// The public key is in the clear, the private key wrapped by the store key.
    public var inboxKey: String { database + ".inbox-key" }
    /// What a merge of the inbox could neither apply nor quarantine (`<store>.inbox-damaged`).
    ///
    /// These are bytes that are not a record, and torn tails. They are moved aside before the inbox is
    /// truncated, never dropped.
    public var inboxDamaged: String { database + ".inbox-damaged" }
    /// The base of the inbox's sequence numbers (`<store>.inbox-sequence`).
    ///
    /// It is not secret. A record's sequence is the base plus its offset in the inbox, plus one. Each merge
    /// raises the base past what it merged.
    public var inboxSequence: String { database + ".inbox-sequence" }
    /// The marker present only while the store is being created (`<store>.creating`).
    ///
    /// See <doc:KeyFileFormats>. It names the key file its creation made, and a key file without its store is
    /// an interrupted creation only when the marker names that key file.
    public var creationMarker: String { database + ".creating" }
    /// A store file a creation left unfinished, moved aside (`<store>.unfinished`, with its log beside it as
    /// `<store>.unfinished-wal`).
    ///
    /// See <doc:KeyFileFormats>. A crash while a store is built leaves its file beside a creation marker of
    /// stage 3. Nothing in it was ever acknowledged, so the next attach builds the store again; what was there
    /// is moved here, replacing what an earlier interrupted creation left, rather than deleted.
    public var unfinished: String { database + ".unfinished" }

    /// A rewrite of the store into another format (`migrate`), complete and synced, waiting to replace the database.
    ///
    /// The file is `<store>.rewrite` (<doc:KeyFileFormats>, *Rewriting a store*). It is present after the
    /// rewrite's commit point, until the next step (or the next attach) renames it over the database.
    public var rewrite: String { database + ".rewrite" }
    /// The rewrite while it is being written (`<store>.rewrite-tmp`, with SQLite's `-journal` beside it).
    ///
    /// It is never complete, and the next attach removes it.
    public var rewriteTemporary: String { database + ".rewrite-tmp" }
    /// The key file the store will have once rewritten (`<store>.key.rewrite`).
    ///
    /// It holds the same store key, with the new format recorded. While it exists the rewrite is not committed;
    /// renaming it over ``key`` commits it.
    public var keyRewrite: String { key + ".rewrite" }

    /// Every file, the database first.
    public var all: [String] {
        [database, writeAheadLog, sharedMemory, key, inbox, inboxKey, inboxDamaged, inboxSequence, creationMarker,
         unfinished, rewrite, rewriteTemporary, keyRewrite]
    }
}
