internal import EncryptedSQLite
internal import SecureKeys

/// The store's side of the locked inbox.
///
/// It records which records were handled, so a crash between a merge's commit and the inbox file's truncation
/// never applies one twice. It keeps the quarantine of records that could not be applied, sealed, with why and
/// how often they failed.
///
/// Every call runs on the caller's connection, inside the caller's transaction.
struct InboxLedger {
    let database: Database

    /// Creates the tables when missing (and gives a store from before generations its `generation` column).
    func prepare() throws {
        try database.execute("""
            CREATE TABLE IF NOT EXISTS inbox_applied(id BLOB PRIMARY KEY NOT NULL, generation INTEGER NOT NULL DEFAULT 0);
            CREATE TABLE IF NOT EXISTS inbox_quarantine(
                id BLOB PRIMARY KEY NOT NULL, kind TEXT, schema_version INTEGER, sealed BLOB NOT NULL,
                reason TEXT NOT NULL, attempts INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS inbox_sequence(id INTEGER PRIMARY KEY CHECK (id = 0), highest INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS inbox_replays(id BLOB PRIMARY KEY NOT NULL)
            """)
        let columns = try database.rows("PRAGMA table_info(inbox_applied)").compactMap { $0["name"]?.string }
        if !columns.contains("generation") {
            try database.execute("ALTER TABLE inbox_applied ADD COLUMN generation INTEGER NOT NULL DEFAULT 0")
        }
    }

    /// The generation of the merge that starts.
    ///
    /// It is one more than any kept id's.
    func nextGeneration() throws -> Int64 {
        (try database.scalar("SELECT coalesce(max(generation), 0) + 1 FROM inbox_applied")?.int64) ?? 1
    }

    /// Records that this merge (`generation`) handles the record `id`.
    ///
    /// - Returns: `false` when an earlier merge handled it already (a crash between its commit and the inbox's
    ///   truncation presented it again): it must not be handled twice, and its id is kept with this merge's.
    func markHandled(_ id: InboxEntry.ID, generation: Int64) throws -> Bool {
        try database.execute("INSERT OR IGNORE INTO inbox_applied(id, generation) VALUES (?, ?)", [.blob(id.bytes), .integer(generation)])
        if database.changes == 1 { return true }
        try database.execute("UPDATE inbox_applied SET generation = ? WHERE id = ?", [.integer(generation), .blob(id.bytes)])
        return false
    }

    /// Forgets the ids of earlier merges.
    ///
    /// Every record the inbox file still holds was handled by this merge (`generation`), so only its ids can be
    /// presented again by a crash before the truncation.
    func forgetEarlierThan(_ generation: Int64) throws {
        try database.execute("DELETE FROM inbox_applied WHERE generation < ?", [.integer(generation)])
    }

    /// The highest sequence number of a record this store merged (applied or quarantined).
    ///
    /// 0 before any.
    func highestSequence() throws -> UInt64 {
        UInt64(bitPattern: try database.scalar("SELECT highest FROM inbox_sequence WHERE id = 0")?.int64 ?? 0)
    }

    /// Records `sequence` as the highest merged.
    func setHighestSequence(_ sequence: UInt64) throws {
        try database.execute(
            "INSERT OR REPLACE INTO inbox_sequence(id, highest) VALUES (0, ?)", [.integer(Int64(bitPattern: sequence))])
    }

    /// Why `entry` is a replay when it is one, given the highest sequence merged before it.
    ///
    /// Its sequence is not above it, or it carries none (payload version 1 or 2) after sequenced records were
    /// merged.
    static func replayReason(_ entry: InboxEntry, highest: UInt64) -> String? {
        guard let sequence = entry.sequence else {
            return highest == 0
                ? nil
                : "replayed: it carries no sequence number (an old payload version) and this store has merged sequenced records"
        }
        return sequence > highest
            ? nil : "replayed: its sequence number, \(sequence), is not above \(highest), the highest this store has merged"
    }

    /// Marks a quarantined record as a replay, so a retry keeps it in quarantine.
    func markReplay(_ id: InboxEntry.ID) throws {
        try database.execute("INSERT OR IGNORE INTO inbox_replays(id) VALUES (?)", [.blob(id.bytes)])
    }

    /// Whether the quarantined record `id` was found to be a replay.
    func isReplay(_ id: InboxEntry.ID) throws -> Bool {
        try database.scalar("SELECT count(*) FROM inbox_replays WHERE id = ?", [.blob(id.bytes)])?.int64 ?? 0 > 0
    }

    /// How many handled ids are kept.
    func handledCount() throws -> Int {
        Int(try database.scalar("SELECT count(*) FROM inbox_applied")?.int64 ?? 0)
    }

    /// Keeps a record that could not be applied (or counts one more failure of a kept one).
    func quarantine(
        _ id: InboxEntry.ID, kind: String?, schemaVersion: Int?, sealed: [UInt8], reason: String
    ) throws -> QuarantinedInboxRecord {
        // SQLCipher 3.4.1 is SQLite 3.15: no UPSERT, so update first and insert when nothing was there.
        try database.execute(
            "UPDATE inbox_quarantine SET reason = ?, attempts = attempts + 1 WHERE id = ?", [.text(reason), .blob(id.bytes)])
        if database.changes == 0 {
            try database.execute(
                "INSERT INTO inbox_quarantine(id, kind, schema_version, sealed, reason, attempts) VALUES (?, ?, ?, ?, ?, 1)",
                [.blob(id.bytes), kind.map { .text($0) } ?? .null, schemaVersion.map { .integer(Int64($0)) } ?? .null, .blob(sealed), .text(reason)])
        }
        return try quarantined([id]).first
            ?? QuarantinedInboxRecord(id: id, kind: kind, schemaVersion: schemaVersion, reason: reason, attempts: 1)
    }

    /// The kept records, oldest first (all of them, or those named).
    func quarantined(_ ids: [InboxEntry.ID]? = nil) throws -> [QuarantinedInboxRecord] {
        try rows(ids, columns: "id, kind, schema_version, reason, attempts").map { row in
            QuarantinedInboxRecord(
                id: InboxEntry.ID(bytes: row[0].blob ?? []), kind: row[1].string, schemaVersion: row[2].int64.map { Int($0) },
                reason: row[3].string ?? "", attempts: Int(row[4].int64 ?? 0))
        }
    }

    /// The kept records' sealed bytes, oldest first (all of them, or those named).
    func sealed(_ ids: [InboxEntry.ID]? = nil) throws -> [(id: InboxEntry.ID, sealed: [UInt8])] {
        try rows(ids, columns: "id, sealed").map { (InboxEntry.ID(bytes: $0[0].blob ?? []), $0[1].blob ?? []) }
    }

    /// Removes a kept record that has now been applied.
    func release(_ id: InboxEntry.ID) throws {
        try database.execute("DELETE FROM inbox_replays WHERE id = ?", [.blob(id.bytes)])
        try database.execute("DELETE FROM inbox_quarantine WHERE id = ?", [.blob(id.bytes)])
    }

    /// Removes kept records for good (all of them, or those named).
    ///
    /// - Returns: how many were removed.
    func discard(_ ids: [InboxEntry.ID]? = nil) throws -> Int {
        guard let ids else {
            try database.execute("DELETE FROM inbox_replays", [])
            try database.execute("DELETE FROM inbox_quarantine", [])
            return database.changes
        }
        var removed = 0
        for id in ids {
            try release(id)
            removed += database.changes
        }
        return removed
    }

    private func rows(_ ids: [InboxEntry.ID]?, columns: String) throws -> [Row] {
        guard let ids else { return try database.rows("SELECT \(columns) FROM inbox_quarantine ORDER BY rowid") }
        return try ids.flatMap { try database.rows("SELECT \(columns) FROM inbox_quarantine WHERE id = ?", [.blob($0.bytes)]) }
    }

    /// Applies `entry` in a savepoint of its own.
    ///
    /// - Returns: `nil` when it was applied; the error when it failed and was rolled back — the record's own
    ///   failure (a constraint, an unknown kind, a decoding error, the app's own error).
    /// - Throws: a failure that is not the record's (the disk is full, the store is damaged or read-only): the
    ///   whole merge must fail and leave the inbox as it is.
    func applyInSavepoint(_ entry: InboxEntry, handlers: InboxHandlers) throws -> (any Error)? {
        try database.execute("SAVEPOINT inbox_record", [])
        do {
            try handlers.apply(entry, to: database)
            try database.execute("RELEASE inbox_record", [])
            return nil
        } catch {
            if Self.failsTheWholeMerge(error) { throw error }
            try database.execute("ROLLBACK TO inbox_record", [])
            try database.execute("RELEASE inbox_record", [])
            return error
        }
    }

    /// Whether `error` says the store itself cannot be written, rather than that one record cannot be applied.
    static func failsTheWholeMerge(_ error: any Error) -> Bool {
        // A failure of the connection (the SQL layer names its file), thrown as it is or as another error's cause.
        func connectionFailure(_ error: (any Error)?) -> StoreError? {
            (error as? StoreError).flatMap { $0.path != nil ? $0 : nil }
        }
        guard let failure = connectionFailure(error) ?? connectionFailure((error as? StoreError)?.cause) else { return false }
        return [.diskFull, .readOnly, .storeUnavailable, .storeDamaged, .busy, .closed, .notSQLCipher, .wrongKey].contains(failure.code)
    }
}
