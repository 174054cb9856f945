internal import CSQLCipher
import Glibc

/// What one connection learns from SQLite's authorizer, commit and rollback hooks.
///
/// It learns which tables each statement reads and writes (found once, when the statement is compiled), which
/// tables the open transaction wrote, and which ones committed transactions wrote. While a read is tracked, it
/// learns which tables the read looked at.
///
/// The authorizer runs while SQLite compiles a statement (`sqlite3_prepare_v2`, and again if SQLite
/// recompiles it after a schema change), so a cached statement is inspected once, not on every run; the
/// row-level `sqlite3_update_hook` is not used, so a 100,000-row insert pays nothing per row.
///
/// Owned by its ``Database``, used on the connection's thread only, like the connection.
final class ConnectionHooks {
    /// Tables read by the statement being compiled.
    private(set) var compiledReads = TableRegion()
    /// Tables written by the statement being compiled.
    private(set) var compiledWrites = TableRegion()
    /// Tables the open transaction wrote so far.
    private var transactionWrites = TableRegion()
    /// Tables written by transactions that committed since the last ``takeCommittedWrites()``.
    private var committedWrites = TableRegion()
    /// The tables read since ``startTrackingReads()``, or `nil` when reads are not tracked.
    private(set) var trackedReads: TableRegion?

    /// Installs the hooks on `connection`.
    ///
    /// They live as long as `self`, which the connection's owner keeps.
    func install(on connection: OpaquePointer) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        sqlite3_set_authorizer(
            connection,
            { context, action, first, second, _, _ in
                Unmanaged<ConnectionHooks>.fromOpaque(context!).takeUnretainedValue().authorize(action, first, second)
            }, context)
        sqlite3_commit_hook(
            connection,
            { context in
                Unmanaged<ConnectionHooks>.fromOpaque(context!).takeUnretainedValue().transactionWillCommit()
                return 0
            }, context)
        sqlite3_rollback_hook(
            connection,
            { context in
                Unmanaged<ConnectionHooks>.fromOpaque(context!).takeUnretainedValue().transactionDidRollBack()
            }, context)
    }

    /// Removes the hooks from `connection`, before it closes.
    static func uninstall(from connection: OpaquePointer) {
        sqlite3_set_authorizer(connection, nil, nil)
        sqlite3_commit_hook(connection, nil, nil)
        sqlite3_rollback_hook(connection, nil, nil)
    }

    /// Called before a statement is compiled.
    func willCompile() {
        compiledReads = TableRegion()
        compiledWrites = TableRegion()
    }

    /// A statement that writes `writes` and reads `reads` starts running.
    func statementWillRun(reads: TableRegion, writes: TableRegion, isQuery: Bool) {
        if !writes.isEmpty { transactionWrites.formUnion(writes) }
        if trackedReads != nil && isQuery {
            // A query whose tables the authorizer did not name (`SELECT count(*) FROM t` on SQLite 3.15)
            // may depend on any table.
            trackedReads!.formUnion(reads.isEmpty ? .everything : reads)
        }
    }

    /// Counts what statements run by `sqlite3_exec` wrote.
    ///
    /// Such statements are compiled and run at once, so what they wrote counts now. It counts as committed when
    /// no transaction is open any more (they committed inside `sqlite3_exec`, before this call), and as part of
    /// the open transaction otherwise.
    func compiledStatementsRan(inTransaction: Bool) {
        if !compiledWrites.isEmpty {
            if inTransaction { transactionWrites.formUnion(compiledWrites) } else { committedWrites.formUnion(compiledWrites) }
        }
        if trackedReads != nil && !compiledReads.isEmpty { trackedReads!.formUnion(compiledReads) }
    }

    /// Starts collecting the tables that queries read.
    func startTrackingReads() { trackedReads = TableRegion() }

    /// Stops collecting and returns what was read.
    func stopTrackingReads() -> TableRegion {
        defer { trackedReads = nil }
        return trackedReads ?? TableRegion()
    }

    /// The tables written by transactions committed since the last call, emptied.
    func takeCommittedWrites() -> TableRegion {
        defer { committedWrites = TableRegion() }
        return committedWrites
    }

    private func transactionWillCommit() {
        committedWrites.formUnion(transactionWrites)
        transactionWrites = TableRegion()
    }

    private func transactionDidRollBack() {
        transactionWrites = TableRegion()
    }

    private func authorize(_ action: Int32, _ first: UnsafePointer<CChar>?, _ second: UnsafePointer<CChar>?) -> Int32 {
        guard let first else { return SQLITE_OK }
        switch action {
        case SQLITE_READ:
            compiledReads.formUnion(TableRegion(tables: [String(cString: first)]))
        case SQLITE_INSERT, SQLITE_UPDATE:
            compiledWrites.formUnion(TableRegion(tables: [String(cString: first)]))
        case SQLITE_DELETE:
            // DROP TABLE reports a delete from sqlite_master; the dropped table is reported separately below.
            if strcmp(first, "sqlite_master") != 0 && strcmp(first, "sqlite_temp_master") != 0 {
                compiledWrites.formUnion(TableRegion(tables: [String(cString: first)]))
            }
        case SQLITE_DROP_TABLE, SQLITE_DROP_TEMP_TABLE, SQLITE_CREATE_TABLE, SQLITE_CREATE_TEMP_TABLE,
            SQLITE_ALTER_TABLE:
            // A schema change can change any query's result (a table that appears, disappears or gains a
            // column).
            compiledWrites = .everything
        default:
            break
        }
        return SQLITE_OK
    }
}
