public import EncryptedSQLite

extension DataController {
    /// The result of `read`, fresh after every committed transaction that changes what it read.
    ///
    /// This is an observation, as GRDB's `ValueObservation`, that follows the store through the device's locks.
    ///
    /// ```swift
    /// for try await notes in controller.values(tracking: { db in
    ///     try db.fetchAll(Note.self, "SELECT * FROM notes ORDER BY createdAt DESC")
    /// }) {
    ///     show(notes)
    /// }
    /// ```
    ///
    /// - The first value comes as soon as the store is ready (at once if it is).
    /// - After that, a new value comes after each commit that wrote a table `read` looked at (SQLite's
    ///   authorizer tells which): the app's own writes, and the records an inbox merge applies. Commits to
    ///   other tables do not re-run `read`. Several commits in a row may give one value.
    /// - While the store is locked away (class-A lock) the sequence is silent — it does not fail — and it
    ///   resumes with a fresh value when the store is ready again.
    /// - `read` runs on a reader, off the main actor, in one read transaction: a consistent snapshot.
    /// - Only the newest value is buffered: a consumer slower than the commits sees the latest, not each.
    ///
    /// The sequence ends when the consuming task is cancelled or the controller terminates (or goes away), and
    /// fails with the first error `read` throws (a missing table, a row that does not decode) or the store's
    /// failure to attach. Asked for after ``terminate()``, it fails at once with `StoreError.Code.terminated`, as
    /// every call after terminate does.
    ///
    /// - Parameter read: what to observe; it must only read.
    /// - Returns: the values, newest first when the consumer lags.
    public func values<Value: Sendable>(
        tracking read: @escaping @Sendable (Database) throws -> Value
    ) -> AsyncThrowingStream<Value, any Error> {
        let (values, continuation) = AsyncThrowingStream.makeStream(
            of: Value.self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(1))
        if case .terminated = phase {
            // Called after terminate, like every other call: it says so instead of ending as if there were nothing.
            continuation.finish(throwing: StoreError.terminated())
            return values
        }
        let phases = self.phases()
        let task = Task { @MainActor [weak self] in
            for await phase in phases {
                switch phase {
                case .ready:
                    guard let coordinator = self?.coordinator else { continue }
                    do {
                        // Returns when the store closes (the class-A lock); the next ready phase resumes.
                        try await coordinator.observe(read) { continuation.yield($0) }
                    } catch let error as StoreError where error.code == .protectedDataUnavailable || error.code == .closed {
                        // Locked away while reading: silent until the store is ready again. Closed by terminate:
                        // the next phase says so.
                        continue
                    } catch {
                        continuation.finish(throwing: error)
                        return
                    }
                case .failed(let error):
                    continuation.finish(throwing: error)
                    return
                default:
                    continue
                }
            }
            // The phases end after `terminated`, with the consuming task's cancellation, or with the controller.
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return values
    }
}
