/// The results of a query read one at a time, as SQLite steps through them.
///
/// Memory stays that of one row however many rows the query returns (GRDB's `RecordCursor` and `RowCursor`).
///
/// ```swift
/// try await coordinator.read { db in
///     let players = try Player.fetchCursor(db)
///     while let player = try players.next() { total += player.score }
/// }
/// ```
///
/// A cursor owns its prepared statement until it ends: the connection's statement cache does not hand that
/// statement to anyone else meanwhile (a query of the same SQL prepares another), so nothing resets it under
/// the cursor. It ends — its statement reset, its read lock released — when it returns its last element, when
/// a step or a decoding throws (the error reaches the caller; later calls return `nil`), when it is released,
/// and when the transaction it was opened in ends. A cursor works only inside the `read` or `write` closure
/// (the ``Database/transaction(_:_:)``) that opened it: it is not `Sendable`, so a store's closure cannot
/// return it, and one kept past its transaction throws `StoreError.Code.misuse` at its next ``next()``.
///
/// Not a `Sequence`: reading a row can fail, and `Sequence` cannot say so. Use `while let … = try
/// cursor.next()` or ``forEach(_:)``.
public final class DatabaseCursor<Element> {
    private let state: CursorState
    private let decode: (Statement) throws -> Element

    init(_ state: CursorState, decode: @escaping (Statement) throws -> Element) {
        self.state = state
        self.decode = decode
    }

    deinit {
        state.finish()
    }

    /// The next element, or `nil` after the last one.
    ///
    /// - Throws: the step's `StoreError`, or the decoding's (`StoreError.Code.misuse` naming the
    ///   column); either ends the cursor. `StoreError.Code.misuse` when the cursor is used after the
    ///   transaction it was opened in ended, or after its connection closed.
    public func next() throws -> Element? {
        guard let statement = try state.statementForNextStep() else { return nil }
        do {
            guard try statement.step() else {
                state.finish()
                return nil
            }
            return try decode(statement)
        } catch {
            state.finish()
            throw error
        }
    }

    /// Calls `body` with each remaining element, in order.
    ///
    /// - Parameter body: what to do with an element; when it throws, the cursor ends and the error reaches
    ///   the caller.
    /// - Throws: what ``next()`` or `body` throws.
    public func forEach(_ body: (Element) throws -> Void) throws {
        do {
            while let element = try next() { try body(element) }
        } catch {
            state.finish()
            throw error
        }
    }
}

@available(*, unavailable)
extension DatabaseCursor: Sendable {}

/// What a cursor holds of its connection.
///
/// It holds its statement while it runs, and the transaction it belongs to. The connection keeps the states
/// of the cursors opened in its current transaction, to end them with it.
final class CursorState {
    private var statement: Statement?
    private weak var database: Database?
    /// The transaction the cursor was opened in (``Database/currentTransactionID``), or `nil` when it was opened
    /// outside one.
    private let transactionID: Int?

    init(statement: Statement, database: Database) {
        self.statement = statement
        self.database = database
        self.transactionID = database.currentTransactionID
        statement.isHeldByCursor = true
    }

    /// Whether the cursor still holds its statement.
    var isRunning: Bool { statement != nil }

    /// The statement to step, or `nil` once the cursor ended.
    ///
    /// - Throws: `StoreError.Code.misuse` when the transaction the cursor was opened in is over or the
    ///   connection closed.
    func statementForNextStep() throws -> Statement? {
        guard let database, database.isOpen else {
            finish()
            throw StoreError(code: .misuse, message: "a cursor was used after its database connection closed")
        }
        if let transactionID, database.currentTransactionID != transactionID {
            finish()
            throw StoreError(
                code: .misuse,
                message: "a cursor was used after the read or write that opened it ended; a cursor works only inside that closure (collect the values with fetchAll, or copy them out, instead)",
                path: database.path)
        }
        return statement
    }

    /// Ends the cursor.
    ///
    /// Its statement is reset (releasing its read lock) and its bindings cleared, and the statement cache may
    /// hand it out again. Harmless when already ended.
    func finish() {
        guard let statement else { return }
        self.statement = nil
        statement.reset()
        statement.releaseBindings()
        statement.isHeldByCursor = false
    }
}

extension Database {
    /// A cursor over the rows of a query, each read as it is stepped to.
    ///
    /// - Parameters:
    ///   - sql: one `SELECT`.
    ///   - arguments: its arguments.
    /// - Returns: a cursor that works only inside the current `read` or `write` (see ``DatabaseCursor``).
    /// - Throws: the statement's `StoreError` (preparing and binding; the rows' failures come from
    ///   ``DatabaseCursor/next()``).
    public func rowCursor(_ sql: String, _ arguments: StatementArguments = []) throws -> DatabaseCursor<Row> {
        var names: [String]?
        return try makeCursor(sql, arguments) { statement in
            let columnNames = names ?? statement.columnNames
            names = columnNames
            return Row(columnNames: columnNames, values: columnNames.indices.map(statement.value(at:)))
        }
    }

    /// A cursor over the rows of a query, each decoded as `Record` as it is stepped to.
    ///
    /// This is the decoding of ``fetchAll(_:_:_:)``, one row at a time.
    ///
    /// - Parameters:
    ///   - type: the record type; its coding keys name the columns.
    ///   - sql: one `SELECT`.
    ///   - arguments: its arguments.
    /// - Returns: a cursor that works only inside the current `read` or `write` (see ``DatabaseCursor``).
    /// - Throws: the statement's `StoreError` (preparing and binding; the rows' failures, and a row that
    ///   does not decode, come from ``DatabaseCursor/next()``).
    public func fetchCursor<Record: Decodable>(
        _ type: Record.Type, _ sql: String, _ arguments: StatementArguments = []
    ) throws -> DatabaseCursor<Record> {
        var names: [String]?
        return try makeCursor(sql, arguments) { statement in
            let columnNames = names ?? statement.columnNames
            names = columnNames
            let row = Row(columnNames: columnNames, values: columnNames.indices.map(statement.value(at:)))
            return try RowDecoder.decode(Record.self, from: row)
        }
    }

    private func makeCursor<Element>(
        _ sql: String, _ arguments: StatementArguments, decode: @escaping (Statement) throws -> Element
    ) throws -> DatabaseCursor<Element> {
        let statement = try cachedStatement(sql)
        try statement.bind(arguments)
        let state = CursorState(statement: statement, database: self)
        register(state)
        return DatabaseCursor(state, decode: decode)
    }
}
