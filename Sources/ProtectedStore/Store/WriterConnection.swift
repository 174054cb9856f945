internal import EncryptedSQLite
internal import Foundation
internal import Glibc

/// The store's writer connection, and the one lock every use of it goes through.
///
/// A write runs on the writer's thread when it is awaited (``StoreCoordinator/write(_:)``) and on its caller's
/// thread when it is synchronous (``StoreCoordinator/writeNow(_:)``), so the connection is not the actor's alone:
/// every use of it — a write, an inbox merge, the close taking it away — holds `lock`, and so runs one at a time
/// and never inside another's transaction. The close takes the connection out under the lock: a use that comes
/// after it fails with the close's error and never touches a closed connection.
///
/// The lock is not reentrant, and a thread that asked for it again while it holds it would wait for itself
/// forever. Like GRDB's `SchedulingWatchdog`, it knows which thread holds it and refuses that thread with
/// `StoreError.Code.misuse` instead.
final class WriterConnection: @unchecked Sendable {
    // @unchecked Sendable: `database` and `closeReason` are only touched with `lock` held; `holder` is only
    // touched under `holderLock`.

    private let lock = NSLock()
    private var database: Database?
    /// Why the store was closed; `nil` while it is open.
    private var closeReason: StoreCloseReason?
    private let holderLock = NSLock()
    /// The thread that holds `lock`, if any.
    private var holder: pthread_t?

    init(_ database: sending Database) {
        self.database = database
    }

    /// Whether the connection is open (the store was not closed).
    var isOpen: Bool {
        lock.lock()
        defer { lock.unlock() }
        return database != nil
    }

    /// Runs `body` with the connection, holding the lock.
    ///
    /// - Parameter operation: what the caller was doing, for the misuse message.
    /// - Throws: `StoreError.Code.misuse` when the calling thread already holds the lock (a write started inside
    ///   another's transaction); the close's error after the store closed; what `body` throws.
    func withConnection<Result>(_ operation: String, _ body: (Database) throws -> Result) throws -> Result {
        if holdsLock {
            throw StoreError(
                code: .misuse,
                message: "\(operation) inside another write's transaction (its body, or an inbox handler) on the same connection: it would wait for that transaction, which waits for it; run the work in the enclosing transaction instead")
        }
        lock.lock()
        setHolder(pthread_self())
        defer {
            setHolder(nil)
            lock.unlock()
        }
        guard let database else { throw (closeReason ?? .closedByApp).error }
        return try body(database)
    }

    /// Takes the connection away for the close, after any use in progress.
    ///
    /// Later uses throw `reason`'s error (or the first close's, when the store was closed already).
    ///
    /// - Returns: the connection, for the caller to close; `nil` when it was taken already.
    func take(_ reason: StoreCloseReason) -> Database? {
        lock.lock()
        defer { lock.unlock() }
        if closeReason == nil { closeReason = reason }
        let taken = database
        database = nil
        return taken
    }

    /// What a use of the closed connection throws.
    var closedError: StoreError {
        lock.lock()
        defer { lock.unlock() }
        return (closeReason ?? .closedByApp).error
    }

    /// Whether the calling thread holds the lock.
    ///
    /// Only the holder itself sets `holder` to its own thread, so the answer for the calling thread cannot change
    /// while it asks.
    private var holdsLock: Bool {
        holderLock.lock()
        defer { holderLock.unlock() }
        guard let holder else { return false }
        return pthread_equal(holder, pthread_self()) != 0
    }

    private func setHolder(_ thread: pthread_t?) {
        holderLock.lock()
        holder = thread
        holderLock.unlock()
    }
}
