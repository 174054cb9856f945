public import Foundation

/// A note, as the app keeps it: one row of the `notes` table.
///
/// A plain `Codable` struct is the whole mapping: `Database.insert(_:into:onConflict:)` writes one column per
/// stored property, named by its coding key, and `fetchAll`/`fetchOne` read rows back by column name. `id` is
/// stored as a 16-byte BLOB, `createdAt` as SQLite's date text (UTC, to the millisecond), `pinned` as 0 or 1,
/// and `tags` — not a column type — as JSON text.
public struct Note: Codable, Sendable, Hashable {
    /// The note's identity, and the table's primary key.
    public var id: UUID
    /// The first line the list shows.
    public var title: String
    /// The text.
    public var body: String
    /// When the note was written. Stored to the millisecond: a `Date` with a finer fraction reads back
    /// rounded down.
    public var createdAt: Date
    /// Whether the list shows it first (a column added by the migration "add notes.pinned").
    public var pinned: Bool
    /// Free-form labels, stored as a JSON array.
    public var tags: [String]

    /// A note.
    ///
    /// - Parameters:
    ///   - id: its identity (a new one by default).
    ///   - title: the first line the list shows.
    ///   - body: the text.
    ///   - createdAt: when it was written.
    ///   - pinned: whether the list shows it first.
    ///   - tags: free-form labels.
    public init(id: UUID = UUID(), title: String, body: String, createdAt: Date, pinned: Bool = false, tags: [String] = []) {
        self.id = id
        self.title = title
        self.body = body
        self.createdAt = createdAt
        self.pinned = pinned
        self.tags = tags
    }
}

extension Note {
    /// The table notes live in.
    public static let table = "notes"

    /// What the list screen shows: pinned notes first, then the newest first.
    public static let listQuery = "SELECT * FROM notes ORDER BY pinned DESC, createdAt DESC"
}
