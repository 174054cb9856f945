public import SecureKeys

/// What a merge of the locked inbox did, record by record.
public struct InboxMergeReport: Sendable, Hashable {
    /// Records applied to the store, in the order they were applied.
    public var merged: [InboxEntry.ID] = []
    /// Records that could not be applied and were moved to the store's quarantine (or, on a retry, stayed there).
    ///
    /// They are never lost, and ``StoreCoordinator/quarantinedInboxRecords()`` lists them.
    public var quarantined: [QuarantinedInboxRecord] = []
    /// Records found again that an earlier merge had handled.
    ///
    /// A crash between its commit and the inbox's truncation leaves them. They are skipped, never applied twice.
    public var alreadyApplied = 0
    /// What was wrong in the inbox file itself.
    ///
    /// That is a torn last record (an append interrupted by a crash, never acknowledged), bytes that are not a
    /// record, a record whose checksum fails, or an inbox that cannot be used at all. Reported, never applied
    /// unless a record's seal proves it intact.
    public var problems: [InboxRecord.Problem] = []
    /// How many bytes this merge moved to the damaged-bytes file (`<store>.inbox-damaged`).
    ///
    /// It moves every span of the inbox that was neither a record nor already there. Nothing is truncated that
    /// was not merged, quarantined or moved aside.
    public var movedAside = 0

    /// An empty report.
    public init() {}

    /// Whether the merge found anything at all.
    public var isEmpty: Bool { merged.isEmpty && quarantined.isEmpty && alreadyApplied == 0 && problems.isEmpty }
}

/// A record of the locked inbox that could not be applied, kept in the store.
///
/// It is kept still sealed.
///
/// Retry it after an app update or a migration (``StoreCoordinator/retryQuarantinedInboxRecords(_:)``), or
/// discard it (``StoreCoordinator/discardQuarantinedInboxRecords(_:)``); nothing else removes it.
public struct QuarantinedInboxRecord: Sendable, Hashable {
    /// The record's identifier (for a record that does not open at all, a checksum of its sealed bytes).
    public let id: InboxEntry.ID
    /// Its kind, when it could be read.
    public let kind: String?
    /// Its schema version, when it could be read.
    public let schemaVersion: Int?
    /// Why it was not applied, the last time it was tried.
    public let reason: String
    /// How many times applying it failed.
    public let attempts: Int

    /// A quarantined record, as read from the store.
    public init(id: InboxEntry.ID, kind: String?, schemaVersion: Int?, reason: String, attempts: Int) {
        self.id = id
        self.kind = kind
        self.schemaVersion = schemaVersion
        self.reason = reason
        self.attempts = attempts
    }
}
