import Foundation
public import ProtectedStore

/// The app's store: where it is, its schema's history, and how locked-inbox records are applied — the one
/// place the app and its share extension agree on.
public enum NotesStore: Sendable {
    /// The migration that creates the `notes` table (the app's first version).
    public static let createNotes = "create notes"
    /// The migration that adds `notes.pinned` (the app's second version).
    public static let addPinned = "add notes.pinned"

    /// The database file inside `container`: the folder the app and its extension share (an app group's
    /// container on a phone).
    ///
    /// - Parameter container: the shared folder (the story creates it first, owner-only).
    public static func path(inContainer container: String) -> String { container + "/Notes.sqlite" }

    /// The schema's history, oldest first: the library's key-value table, then the app's own migrations.
    ///
    /// Each migration runs once, in its own transaction, when the store attaches — before the locked inbox is
    /// merged, so merged records meet the current schema. A shipped migration is never edited; a change to
    /// the schema is a new migration at the end.
    ///
    /// - Parameter version: how many of the app's own migrations this version of the app knows (1 or 2);
    ///   an older version is what step 6 of the story attaches with.
    public static func migrator(version: Int = 2) -> DatabaseMigrator {
        var migrator = DatabaseMigrator.keyValue
        migrator.registerMigration(createNotes) { db in
            try db.execute(
                """
                CREATE TABLE notes(
                    id BLOB PRIMARY KEY NOT NULL,
                    title TEXT NOT NULL,
                    body TEXT NOT NULL,
                    createdAt TEXT NOT NULL,
                    tags TEXT NOT NULL
                )
                """)
        }
        guard version >= 2 else { return migrator }
        migrator.registerMigration(addPinned) { db in
            try db.execute("ALTER TABLE notes ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
        }
        return migrator
    }

    /// The key of the badge — how many shared notes arrived — in the store's key-value table.
    public static let badgeKey = "badge.shared"

    /// How the merge applies locked-inbox records: the library's key-value changes, and ``NoteShared``,
    /// inserted as a note and counted in the badge. The handler runs inside the merge's transaction, in a
    /// savepoint of its own: if it throws (a duplicate id, say), that record alone is quarantined and the merge
    /// goes on. Everything it writes is in the store, so a crash before the merge commits undoes all of it.
    public static let inboxHandlers = InboxHandlers.keyValue.handling(NoteShared.self) { db, shared in
        try db.insert(shared.note, into: Note.table)
        try db.execute("INSERT OR IGNORE INTO entries(key, value) VALUES (?, '0')", [.text(badgeKey)])
        try db.execute("UPDATE entries SET value = CAST(value AS INTEGER) + 1 WHERE key = ?", [.text(badgeKey)])
    }

    /// The handlers with a planted bug, for `notes simulate`: the badge is counted in a file of its own
    /// (`badgeFile`, as an app's preferences would keep it), outside the merge's transaction — so a crash
    /// inside the merge, which undoes the insert and leaves the record to be merged again, counts it twice.
    ///
    /// - Parameter badgeFile: the file the badge is counted in.
    public static func inboxHandlersCountingOutsideTheStore(badgeFile: String) -> InboxHandlers {
        InboxHandlers.keyValue.handling(NoteShared.self) { db, shared in
            try db.insert(shared.note, into: Note.table)
            let badge = (try? String(contentsOfFile: badgeFile, encoding: .utf8)).flatMap { Int($0) } ?? 0
            try String(badge + 1).write(toFile: badgeFile, atomically: true, encoding: .utf8)
        }
    }

    /// The store as the app (of `version`) configures it: class A (`complete`), readable only while the
    /// device is unlocked.
    ///
    /// - Parameters:
    ///   - container: the shared folder.
    ///   - version: which of the app's migrations this version knows (see ``migrator(version:)``).
    public static func configuration(inContainer container: String, version: Int = 2) -> StoreConfiguration {
        StoreConfiguration(
            path: path(inContainer: container), protectionClass: .complete,
            migrator: migrator(version: version), inboxHandlers: inboxHandlers)
    }
}
