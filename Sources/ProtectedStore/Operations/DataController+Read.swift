public import EncryptedSQLite

extension DataController {
    /// Runs `body` on one of the store's readers as soon as the store is ready, and returns its result.
    ///
    /// It runs at once if the store is ready.
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

    /// Runs `body` on one of the store's readers now, on the calling (main) thread, and returns its result.
    ///
    /// This is the synchronous ``read(_:)`` for a UI's short reads, without the two thread hops an awaited
    /// read makes.
    ///
    /// It does not wait for the store: call it when ``phase`` is ``Phase/ready`` (``isInteractionEnabled``). The
    /// main thread is blocked for the read, so keep long reads on ``read(_:)``. It never waits for a write.
    ///
    /// - Parameter body: reads from the store; the connection must not escape it.
    /// - Returns: what `body` returned.
    /// - Throws: what `body` throws, unchanged; `StoreError.Code.protectedDataUnavailable` while the store is
    ///   not attached — protected data unavailable, or the attach under way; the attach's `StoreError` when it
    ///   failed; `StoreError.Code.terminated` after ``terminate()``; `StoreError.Code.misuse` before ``launch(_:)``.
    public func readNow<Result>(_ body: (Database) throws -> Result) throws -> Result {
        try attachedCoordinator(for: "readNow", waitingCall: "read(_:)").readNow(body)
    }

    /// The attached store's coordinator, for a call that does not wait for the store.
    ///
    /// - Parameters:
    ///   - call: the call that does not wait (`readNow`), for the messages.
    ///   - waitingCall: the call that waits instead (`read(_:)`).
    /// - Throws: `StoreError.Code.protectedDataUnavailable` while the store is not attached; the attach's
    ///   `StoreError` when it failed; `StoreError.Code.terminated` after ``terminate()``;
    ///   `StoreError.Code.misuse` before ``launch(_:)``.
    func attachedCoordinator(for call: String, waitingCall: String) throws -> StoreCoordinator {
        let notAttached = StoreError(
            code: .protectedDataUnavailable,
            message: "the store is not attached now (protected data is unavailable, or the attach is under way): \(call) does not wait; \(waitingCall) does")
        switch phase {
        case .ready:
            guard let coordinator else { throw notAttached }
            return coordinator
        case .launching, .waitingForProtectedData:
            throw notAttached
        case .failed(let error):
            throw error
        case .terminated:
            throw StoreError.terminated()
        case .notLaunched:
            throw StoreError(code: .misuse, message: "\(call) before launch: launch the controller first (\(waitingCall) waits for the store)")
        }
    }
}
