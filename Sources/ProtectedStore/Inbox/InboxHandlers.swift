public import EncryptedSQLite

/// How an app applies the records of its locked inbox to its store.
///
/// It has one handler per kind.
///
/// The built-in key-value changes (`put`, `delete`) write the `entries` table that
/// ``StoreCoordinator/put(_:_:)`` uses; an app adds a handler for each of its own ``InboxChange`` types. A
/// record whose kind has no handler, whose schema is newer than the app's, or whose handler throws is not
/// lost: it moves to the store's quarantine, and the merge goes on.
///
/// ```swift
/// let handlers = InboxHandlers.keyValue.handling(VisitLogged.self) { database, visit in
///     try database.execute("INSERT INTO visits(place, at) VALUES (?, ?)",
///                          [.text(visit.place), .real(visit.at.timeIntervalSince1970)])
/// }
/// let store = StoreConfiguration(path: path, inboxHandlers: handlers)
/// ```
public struct InboxHandlers: Sendable {
    /// Applies one entry of a known kind.
    typealias Handler = @Sendable (Database, InboxEntry) throws -> Void

    private var handlers: [String: Handler] = [:]
    /// Whether `put` and `delete` are the built-in key-value handlers (``keyValue``).
    ///
    /// The merge then writes a `put` straight from the opened record, its value never copied into a Swift
    /// `String`.
    private var appliesKeyValueInPlace = false

    /// No handlers.
    ///
    /// Every record is quarantined until the app says how to apply it.
    public init() {}

    /// The built-in key-value changes, applied to the `entries` table.
    public static let keyValue = {
        var handlers = InboxHandlers().handlingKeyValue { database, change in try applyToEntries(change, database) }
        handlers.appliesKeyValueInPlace = true
        return handlers
    }()

    /// Applies a key-value change to the `entries` table.
    ///
    /// This is what ``keyValue`` does, for a handler that does more around it.
    ///
    /// - Parameters:
    ///   - change: the change.
    ///   - database: the store, inside the merge's transaction.
    /// - Throws: the `StoreError` of the write.
    public func apply(_ change: InboxEntry.Change, to database: Database) throws {
        try Self.applyToEntries(change, database)
    }

    private static func applyToEntries(_ change: InboxEntry.Change, _ database: Database) throws {
        switch change {
        case .put(let key, let value):
            // An update, then an insert when there was no row: each statement writes one row, so SQLite needs no
            // statement journal for it. `INSERT OR REPLACE` may delete a row before it inserts one, and inside
            // the merge's transaction SQLite then journals (and encrypts) every page the statement touches first:
            // a quarter of a merge's time.
            try database.execute("UPDATE entries SET value = ? WHERE key = ?", [.text(value), .text(key)])
            if database.changes == 0 {
                try database.execute("INSERT INTO entries(key, value) VALUES (?, ?)", [.text(key), .text(value)])
            }
        case .delete(let key):
            try database.execute("DELETE FROM entries WHERE key = ?", [.text(key)])
        }
    }

    /// These handlers, and `apply` for records of `Change`'s kind (replacing an earlier handler of that kind).
    ///
    /// - Parameters:
    ///   - type: the app's change type.
    ///   - apply: writes one change into the store, inside the merge's transaction (its own savepoint).
    /// - Returns: the handlers with this one added.
    public func handling<Change: InboxChange>(
        _ type: Change.Type, _ apply: @escaping @Sendable (Database, Change) throws -> Void
    ) -> InboxHandlers {
        var copy = self
        copy.handlers[Change.kind] = { database, entry in try apply(database, try entry.decode(Change.self)) }
        return copy
    }

    /// These handlers, and `apply` for the built-in `put` and `delete` records.
    ///
    /// - Parameter apply: writes one key-value change into the store.
    /// - Returns: the handlers with this one added.
    public func handlingKeyValue(_ apply: @escaping @Sendable (Database, InboxEntry.Change) throws -> Void) -> InboxHandlers {
        var copy = self
        let handler: Handler = { database, entry in
            guard let change = try entry.change else { throw StoreError.inboxUnknownKind(entry.kind, id: entry.id) }
            try apply(database, change)
        }
        copy.handlers[InboxEntry.putKind] = handler
        copy.handlers[InboxEntry.deleteKind] = handler
        copy.appliesKeyValueInPlace = false
        return copy
    }

    /// The kinds these handlers apply.
    public var kinds: Set<String> { Set(handlers.keys) }

    /// Applies `entry` with the handler of its kind.
    ///
    /// - Throws: `StoreError.Code.inboxUnknownKind` when no handler takes its kind; what the handler throws.
    func apply(_ entry: InboxEntry, to database: Database) throws {
        if appliesKeyValueInPlace && entry.kind == InboxEntry.putKind {
            // What `applyToEntries` does for a put, with the value bound in place (SQLite copies it once, into
            // its row): a merge holds the largest record about twice, not four times.
            return try entry.withPut { key, value in
                try database.execute("UPDATE entries SET value = ? WHERE key = ?", [.null, .text(key)], borrowingText: value, at: 1)
                if database.changes == 0 {
                    try database.execute("INSERT INTO entries(key, value) VALUES (?, ?)", [.text(key), .null], borrowingText: value, at: 2)
                }
            }
        }
        guard let handler = handlers[entry.kind] else { throw StoreError.inboxUnknownKind(entry.kind, id: entry.id) }
        try handler(database, entry)
    }
}
