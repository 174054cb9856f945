internal import CSQLCipher

extension Database {
    /// How a transaction takes its lock.
    public enum TransactionKind: String, Sendable {
        /// Takes no lock until the first read or write (`BEGIN DEFERRED`).
        case deferred = "DEFERRED"
        /// Takes the write lock at once (`BEGIN IMMEDIATE`).
        ///
        /// The store's writes use it, so they never fail half-way with `busy`.
        case immediate = "IMMEDIATE"
        /// Takes the exclusive lock at once (`BEGIN EXCLUSIVE`).
        case exclusive = "EXCLUSIVE"
    }

    /// Runs `body` in a transaction.
    ///
    /// It is committed when `body` returns, and rolled back when it throws.
    ///
    /// Transactions do not nest: inside one — and every store write (`StoreCoordinator.write`) is inside one
    /// — this fails with `StoreError.Code.misuse` before running `body`, saying so. Use
    /// ``inSavepoint(_:)`` for a part that may fail on its own, inside a transaction or not. (Not turned into
    /// a savepoint silently: `kind` would then be ignored, and a caller who believes the work commits on
    /// return would find it rolled back with the outer transaction.)
    ///
    /// - Throws: what `body` throws (after the rollback), or the commit's failure; `StoreError.Code.misuse`
    ///   when a transaction is already open.
    public func transaction<Result>(_ kind: TransactionKind = .immediate, _ body: () throws -> Result) throws -> Result {
        if isInTransaction {
            throw StoreError(
                code: .misuse,
                message: "a transaction is already open on this connection (a store write runs in one); transactions do not nest — use inSavepoint { } for a nested part that rolls back on its own",
                path: path)
        }
        // Prepared once and reused: a one-row write does not parse BEGIN and COMMIT each time.
        try cachedStatement("BEGIN \(kind.rawValue) TRANSACTION").execute([DatabaseValue]())
        let result: Result
        do {
            transactionBodies += 1
            startedTransactions += 1
            do {
                defer {
                    // Before COMMIT or ROLLBACK: a cursor left open would keep its read going past the
                    // transaction (holding an old snapshot), or be cut short by the rollback.
                    endTransactionCursors()
                    transactionBodies -= 1
                }
                result = try body()
            }
            try cachedStatement("COMMIT TRANSACTION").execute([DatabaseValue]())
        } catch {
            if let handle, sqlite3_get_autocommit(handle) == 0 {
                try? cachedStatement("ROLLBACK TRANSACTION").execute([DatabaseValue]())
            }
            throw error
        }
        return result
    }

    /// Runs `body` in a savepoint.
    ///
    /// Its changes are kept when it returns, and only they are undone when it throws. Then the error reaches
    /// the caller unchanged.
    ///
    /// Inside a transaction the savepoint nests (`SAVEPOINT`, then `RELEASE`, or `ROLLBACK TO` and `RELEASE`
    /// when `body` throws): what it kept commits or rolls back with the enclosing transaction. Savepoints nest
    /// in savepoints. Outside a transaction it is one, ``TransactionKind/immediate`` like the store's writes,
    /// committed when `body` returns: a top-level `SAVEPOINT` would take SQLite's deferred lock, and could
    /// fail half-way with `busy`.
    ///
    /// ```swift
    /// try coordinator.write { db in
    ///     try db.execute("INSERT INTO player (name) VALUES (?)", ["Arthur"])
    ///     do {
    ///         try db.inSavepoint {
    ///             try db.execute("INSERT INTO score (player, points) VALUES (?, ?)",
    ///                            ["Arthur", 100])
    ///             try validate(db)  // throws: only the score is undone
    ///         }
    ///     } catch let error as ValidationError { log(error) }
    /// }  // commits the player
    /// ```
    ///
    /// Unlike GRDB's `inSavepoint`, whose body returns `.commit` or `.rollback`, the body here returns a value
    /// and rolls back by throwing, as ``transaction(_:_:)`` does: a result needs no captured variable, and a
    /// failure cannot be dropped by returning `.rollback` without saying why. To discard work with no error
    /// to report, throw one of your own and catch it around the call.
    ///
    /// - Parameter body: the work; it uses this connection.
    /// - Returns: what `body` returned.
    /// - Throws: what `body` throws, unchanged (after the rollback to the savepoint); the failure of
    ///   `SAVEPOINT` or `RELEASE` (or, outside a transaction, of the commit) as a `StoreError`.
    public func inSavepoint<Result>(_ body: () throws -> Result) throws -> Result {
        guard isInTransaction else { return try transaction(.immediate, body) }
        // One name for every savepoint, as GRDB does: ROLLBACK TO and RELEASE act on the innermost savepoint
        // of that name, which is this call's, whatever the body opened and closed in between.
        try cachedStatement("SAVEPOINT encryptedsqlite").execute([DatabaseValue]())
        let result: Result
        do {
            result = try body()
        } catch {
            // After an error that made SQLite roll the whole transaction back (a full disk, an interrupt)
            // there is no savepoint left to go back to; the enclosing transaction sees that at its commit.
            if isInTransaction {
                do {
                    try cachedStatement("ROLLBACK TRANSACTION TO SAVEPOINT encryptedsqlite").execute([DatabaseValue]())
                    try cachedStatement("RELEASE SAVEPOINT encryptedsqlite").execute([DatabaseValue]())
                } catch {
                    // The body's changes could not be undone alone: undo the whole transaction rather than let
                    // RELEASE keep them. What follows in it is refused, and the caller still gets its error.
                    if let handle { _ = sqlite3_exec(handle, "ROLLBACK TRANSACTION", nil, nil, nil) }
                }
            }
            throw error
        }
        try cachedStatement("RELEASE SAVEPOINT encryptedsqlite").execute([DatabaseValue]())
        return result
    }

    /// Refuses a statement inside a ``transaction(_:_:)`` body once SQLite has rolled that transaction back.
    ///
    /// SQLite does so on its own after a full disk, an I/O error or an interrupt. The statement would
    /// otherwise run, and commit, outside any transaction, with part of a write committed and the rest lost at
    /// the body's end. GRDB does the same with its aborted transactions.
    func checkTransactionNotAborted() throws {
        guard transactionBodies > 0, let handle, sqlite3_get_autocommit(handle) != 0 else { return }
        throw StoreError(
            code: .misuse,
            message: "SQLite rolled this transaction back after an earlier error; nothing more runs in it (let the error end the write)",
            path: path)
    }

    /// The running ``transaction(_:_:)`` body's number, `nil` outside one.
    ///
    /// A cursor opened in it works only while this stays the same.
    var currentTransactionID: Int? { transactionBodies > 0 ? startedTransactions : nil }

    /// Keeps `cursor` to end it with the running transaction body.
    ///
    /// A cursor opened outside one ends on its own (last row, error, release).
    func register(_ cursor: CursorState) {
        guard transactionBodies > 0 else { return }
        // Cursors that already ended hold no statement; drop them now and then, so a transaction that opens
        // many cursors keeps only the running ones.
        if transactionCursors.count >= 32 { transactionCursors.removeAll { !$0.isRunning } }
        transactionCursors.append(cursor)
    }

    private func endTransactionCursors() {
        for cursor in transactionCursors { cursor.finish() }
        transactionCursors.removeAll()
    }

    /// Whether a transaction is open.
    public var isInTransaction: Bool {
        handle.map { sqlite3_get_autocommit($0) == 0 } ?? false
    }
}
