public import EncryptedSQLite

extension DataController {
    /// Runs `body` on one of the store's readers as soon as the store is ready — at once if it is — and
    /// returns its result.
    ///
    /// Unlike ``perform(_:deadline:_:)``, a read does not join the operation queue: it never waits behind
    /// queued operations or a running write (an import in a `perform`), and it runs off the main actor, in one
    /// read transaction. What it waits for is the store: while protected data is unavailable it waits,
    /// silently, for the deferred setup; if the store closes at a lock while the read waits for a reader, it
    /// waits for the next ready phase and runs then.
    ///
    /// - Parameter body: reads from the store; the connection must not escape it.
    /// - Returns: what `body` returned.
    /// - Throws: what `body` throws, unchanged; the attach's `StoreError` when the store failed;
    ///   `StoreError.Code.terminated` when the controller terminated first; `CancellationError` when the
    ///   calling task was cancelled while it waited.
    public func read<Result: Sendable>(_ body: @escaping @Sendable (Database) throws -> Result) async throws -> Result {
        for await phase in phases() {
            switch phase {
            case .ready:
                guard let coordinator else { continue }
                do {
                    return try await coordinator.read(body)
                } catch let error as StoreError
                    where (error.code == .protectedDataUnavailable || error.code == .closed) && coordinator.isClosedForReads
                {
                    // Closed by a lock before the read began: it runs at the next ready phase. Closed by terminate:
                    // the next phase says so.
                    continue
                }
            case .failed(let error):
                throw error
            case .terminated:
                throw StoreError.terminated()
            case .notLaunched, .launching, .waitingForProtectedData:
                continue
            }
        }
        try Task.checkCancellation()
        throw StoreError.terminated()
    }
}
