public import Foundation
public import ProtectedStore

/// A note shared into the app from another process — the share extension — at a moment when the store may
/// be locked.
///
/// The extension cannot open the store (it holds no key for it), so it seals this change into the store's
/// locked inbox with `LockedInbox.append(_:)`; the app inserts it as a ``Note`` when the inbox is merged —
/// at the next attach, or within the controller's poll interval while attached — through the handler in
/// ``NotesStore/inboxHandlers``.
///
/// The record carries ``kind`` and ``schemaVersion``: an app version that does not know this kind, or meets a
/// newer version of it, quarantines the record instead of losing it. Never change the encoding of a shipped
/// version; add fields in a new ``schemaVersion``.
public struct NoteShared: InboxChange {
    /// The kind records of this change carry.
    public static let kind = "note-shared"
    /// Version 1: the fields below.
    public static let schemaVersion = 1

    /// The id the note will have: chosen by the extension, so the app can find the note it shared.
    public var id: UUID
    /// The note's title.
    public var title: String
    /// The note's text.
    public var body: String
    /// When it was shared.
    public var sharedAt: Date
    /// Its labels.
    public var tags: [String]

    /// A shared note.
    ///
    /// - Parameters:
    ///   - id: the id the note will have.
    ///   - title: the note's title.
    ///   - body: the note's text.
    ///   - sharedAt: when it was shared.
    ///   - tags: its labels.
    public init(id: UUID = UUID(), title: String, body: String, sharedAt: Date, tags: [String]) {
        self.id = id
        self.title = title
        self.body = body
        self.sharedAt = sharedAt
        self.tags = tags
    }

    /// The note the merge inserts.
    public var note: Note { Note(id: id, title: title, body: body, createdAt: sharedAt, pinned: false, tags: tags) }
}
