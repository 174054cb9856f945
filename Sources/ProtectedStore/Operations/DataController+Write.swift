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
