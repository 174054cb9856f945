/// A change an app seals into the locked inbox while its store cannot be opened, and applies to the store
/// when the inbox is merged.
///
/// The record carries the change's ``kind`` and ``schemaVersion`` beside its JSON encoding, so an app
/// that meets a record written by another version of itself can migrate it, or leave it in quarantine until
/// an update knows how to apply it.
///
/// ```swift
/// struct VisitLogged: InboxChange {
///     static let kind = "visit-logged"
///     static let schemaVersion = 1
///     var place: String
///     var at: Date
/// }
/// try dataController.appendToInbox(VisitLogged(place: "café", at: .now))
/// ```
public protocol InboxChange: Codable, Sendable {
    /// The name records of this change carry.
    ///
    /// It is 1 to 255 bytes of UTF-8, unique among the app's changes. `put` and `delete` are the built-in
    /// key-value changes' and cannot be used.
    static var kind: String { get }
    /// The version of this change's encoding. A record with a newer version than the app's is quarantined,
    /// never guessed at.
    static var schemaVersion: Int { get }
}
