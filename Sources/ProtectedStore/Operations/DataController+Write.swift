public import EncryptedSQLite

extension DataController {
    /// Runs `body` in one write transaction as soon as the store is ready, and returns its result.
    ///
    /// It runs at once if the store is ready. It is ``perform(_:deadline:_:)`` with the coordinator's `write`,
    /// the way ``read(_:)`` is the shortcut for a read.
    ///
    /// ```swift
    /// let arthur = try await controller.write { db in
    ///     try Player(id: nil, name: "Arthur", score: 100).inserted(db)
    /// }
    /// ```
    ///
    /// It joins the operation queue as `perform` does: while protected data is unavailable it waits, in order
    /// with the other operations, and runs exactly once when the store attaches. A statement that fails rolls
    /// the whole transaction back.
    ///
    /// - Parameters:
    ///   - name: a name for the app's own logs and for tests, as ``perform(_:deadline:_:)``'s.
    ///   - deadline: how long it may wait for protected data.
    ///   - body: writes to the store; the connection must not escape it.
    /// - Returns: what `body` returned.
    /// - Throws: what `body` throws, unchanged (the transaction is rolled back); otherwise as
    ///   ``perform(_:deadline:_:)``.
    @discardableResult
    public func write<Result: Sendable>(
        _ name: String = "write", deadline: Duration? = nil, _ body: @escaping @Sendable (Database) throws -> Result
    ) async throws -> Result {
        try await perform(name, deadline: deadline) { coordinator in try await coordinator.write(body) }
    }
}

extension DataController {
    /// Runs `body` in one write transaction now, on the calling (main) thread, and returns its result.
    ///
    /// This is the synchronous ``write(_:deadline:_:)`` for a UI's short writes, without the two thread hops an
    /// awaited write makes (`StoreCoordinator/writeNow(_:)`).
    ///
    /// It does not wait for the store: call it when ``phase`` is ``Phase/ready`` (``isInteractionEnabled``). Nor
    /// does it join the operation queue: it runs at once, between two of the store's transactions (an operation's
    /// write in progress is waited for), never inside one. The main thread is blocked for the write and its
    /// `fsync`, so it is for short writes; keep long ones (an import) on ``write(_:deadline:_:)``. It is committed
    /// when it returns, durably, and rolled back when `body` throws.
    ///
    /// - Parameter body: writes to the store; the connection must not escape it.
    /// - Returns: what `body` returned.
    /// - Throws: what `body` throws, unchanged (the transaction is rolled back); the commit's `StoreError`;
    ///   `StoreError.Code.protectedDataUnavailable` while the store is not attached — protected data
    ///   unavailable, or the attach under way; the attach's `StoreError` when it failed;
    ///   `StoreError.Code.terminated` after ``terminate()``; `StoreError.Code.misuse` before ``launch(_:)``, or
    ///   inside another write's transaction.
    @discardableResult
    public func writeNow<Result>(_ body: (Database) throws -> Result) throws -> Result {
        try attachedCoordinator(for: "writeNow", waitingCall: "write(_:)").writeNow(body)
    }
}
