internal import SecureKeys

/// The store's locked inbox.
///
/// It covers appending while the store cannot be opened, and merging once it can.
extension DataController {
    /// The store's locked inbox, where writes go while the store cannot be opened.
    public var inbox: LockedInbox { LockedInbox(configuration: configuration.store) }

    /// Writes `change` even while the store cannot be opened.
    ///
    /// It is sealed to the store's inbox public key and appended durably before this returns. When the store is
    /// attached it is merged at once; otherwise at the next attach (the deferred setup).
    ///
    /// - Parameter change: the write.
    /// - Returns: the record's identifier, which the merge report names.
    /// - Throws: a `StoreError`: `StoreError.Code.inboxUnavailable` before the store first attached,
    ///   `StoreError.Code.inboxRecordTooLarge` (nothing written), `StoreError.Code.ioError`,
    ///   `StoreError.Code.terminated` after ``terminate()`` (nothing written).
    @discardableResult
    public func appendToInbox(_ change: InboxEntry.Change) throws -> InboxEntry.ID {
        try appendToInbox(contentsOf: [change])[0]
    }

    /// Writes several changes to the locked inbox with one `fsync` (see ``appendToInbox(_:)-(InboxEntry.Change)``).
    ///
    /// - Parameter changes: the writes, in order.
    /// - Returns: the records' identifiers, in order.
    /// - Throws: as ``appendToInbox(_:)-(InboxEntry.Change)``.
    @discardableResult
    public func appendToInbox(contentsOf changes: [InboxEntry.Change]) throws -> [InboxEntry.ID] {
        try refuseAfterTerminate()
        let ids = try inbox.append(contentsOf: changes)
        mergeInboxIfReady()
        return ids
    }

    /// Writes the app's own change to the locked inbox (see ``appendToInbox(_:)-(InboxEntry.Change)``).
    ///
    /// The store's ``StoreConfiguration/inboxHandlers`` apply it when it is merged.
    ///
    /// - Parameter change: the change.
    /// - Returns: the record's identifier.
    /// - Throws: as ``appendToInbox(_:)-(InboxEntry.Change)``; `StoreError.Code.invalidArgument` for a
    ///   kind that is empty, longer than 255 bytes, or `put`/`delete`.
    @discardableResult
    public func appendToInbox<Change: InboxChange>(_ change: Change) throws -> InboxEntry.ID {
        try refuseAfterTerminate()
        let id = try inbox.append(change)
        mergeInboxIfReady()
        return id
    }

    /// Writes a record of `kind` whose body is `{"key": …, "value": …}`.
    ///
    /// It is the command-line tool's way to write a change its own app does not know (`inbox put --kind`).
    @discardableResult
    package func appendToInbox(kind: String, key: String, value: String) throws -> InboxEntry.ID {
        try refuseAfterTerminate()
        let id = try inbox.append(kind: kind, key: key, value: value)
        mergeInboxIfReady()
        return id
    }

    /// Tries to apply the quarantined inbox records again (all of them, or those named), and reports the
    /// outcome to observers like any merge.
    ///
    /// - Parameter ids: the records to retry; all of them when `nil`.
    /// - Returns: which were merged and which stay quarantined.
    /// - Throws: as ``perform(_:deadline:_:)``: the retry waits for the store like any operation.
    @discardableResult
    public func retryQuarantinedInboxRecords(_ ids: [InboxEntry.ID]? = nil) async throws -> InboxMergeReport {
        let report = try await perform("retry quarantined inbox records") { try await $0.retryQuarantinedInboxRecords(ids) }
        reportInbox(report)
        return report
    }

    /// Merges what the inbox holds at once when the store is attached.
    ///
    /// These are records from this process. The poll picks up other processes' appends.
    func mergeInboxIfReady() {
        guard let coordinator = machine.store else { return }
        work.begin()
        Task { [weak self, work] in
            // A failure here (the disk is full) leaves the records in the inbox for the next merge.
            if let report = try? await coordinator.mergeInbox() { self?.reportInbox(report) }
            work.end()
        }
    }

    /// While the store is attached, looks at the inbox every ``Configuration/inboxPollInterval`` and merges
    /// what another process (an extension) appended.
    func startInboxPoll() {
        guard let interval = configuration.inboxPollInterval, inboxPoll == nil else { return }
        let work = self.work
        inboxPoll = InboxPoll(inbox: inbox, clock: clock, interval: interval) { [weak self] in
            work.begin()
            Task { @MainActor in
                self?.mergeInboxIfReady()
                work.end()
            }
        }
    }

    func stopInboxPoll() {
        inboxPoll?.stop()
        inboxPoll = nil
    }

    /// Tells observers what a merge did, unless the app was killed.
    func reportInbox(_ report: InboxMergeReport) {
        if case .abandoned = machine.state { return }
        if !report.isEmpty { emit(.inboxMerged(report)) }
    }
}
