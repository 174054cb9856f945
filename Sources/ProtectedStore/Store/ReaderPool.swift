internal import DequeModule
internal import EncryptedSQLite
internal import SecureKeys

/// The store's read-only connections: reads run on them, beside the writer, and never wait for a write.
///
/// In WAL mode a reader sees the database as of the start of its read transaction, whatever the writer is
/// doing, so a UI read returns while a 50,000-row import is open (measured in `Benchmarks/Peers`). Readers
/// are opened on demand, up to ``capacity``, each keyed with the raw store key (no key derivation per open);
/// an idle reader is reused most-recently-used first, so that consecutive reads find a warm page cache. When
/// all are busy a read waits for the first one returned.
///
/// ``close()`` — at the class-A lock, with the writer — closes every idle reader at once, and each busy one as
/// its read ends; the pool's copy of the store key is wiped as soon as no open is in progress. Reads after
/// it fail with `StoreError.Code.protectedDataUnavailable`, as writes do.
final class ReaderPool: Sendable {
    /// One read-only connection, lent to one read at a time.
    private final class Reader: @unchecked Sendable {
        // @unchecked Sendable: the pool hands a reader to one read at a time (it is either in `idle`, or
        // held by exactly one `read`), so its connection is never used from two threads at once.
        let database: Database
        init(_ database: Database) { self.database = database }
    }

    private struct State {
        /// Readers not in use, the most recently returned last.
        var idle: [Reader] = []
        /// Readers open or being opened.
        var count = 0
        /// Opens in progress (the key must outlive them).
        var opening = 0
        /// Reads waiting for a reader, first come first served.
        var waiters: Deque<CheckedContinuation<Reader, any Error>> = []
        /// The store key, wiped at close.
        var key: SecureBytes?
        var isClosed = false
    }

    /// The most readers open at once.
    let capacity: Int
    private let path: String
    private let configuration: Database.Configuration
    private let state: LockedState<State>

    /// A pool for the store at `path`; it takes ownership of `key` and wipes it at ``close()``.
    init(path: String, key: SecureBytes, configuration: Database.Configuration, capacity: Int) {
        precondition(capacity >= 1, "a reader pool has at least one reader")
        var readerConfiguration = configuration
        readerConfiguration.readOnly = true
        readerConfiguration.createIfMissing = false
        self.path = path
        self.configuration = readerConfiguration
        self.capacity = capacity
        self.state = LockedState(State(key: key))
    }

    /// Runs `body` in a read transaction on a reader: one consistent snapshot of the store, however many
    /// statements `body` runs.
    ///
    /// - Parameter trackingTables: whether to collect the tables `body`'s queries read (for observations).
    /// - Returns: what `body` returned, and the tables it read (empty when not tracked).
    /// - Throws: `StoreError.Code.protectedDataUnavailable` once the pool is closed; what `body` throws,
    ///   unchanged; the read transaction's `StoreError`.
    func read<Result>(
        trackingTables: Bool = false, _ body: (Database) throws -> Result
    ) async throws -> (Result, TableRegion) {
        let reader = try await checkOut()
        defer { checkIn(reader) }
        let database = reader.database
        return try database.transaction(.deferred) {
            trackingTables ? try database.trackingReads { try body(database) } : (try body(database), TableRegion())
        }
    }

    /// Closes idle readers now and busy ones when their reads end, fails waiting reads, and wipes the key.
    func close() {
        let (idle, waiters, key) = state.withLock { state -> ([Reader], Deque<CheckedContinuation<Reader, any Error>>, SecureBytes?) in
            state.isClosed = true
            let idle = state.idle
            let waiters = state.waiters
            state.idle = []
            state.waiters = []
            state.count -= idle.count
            // An open in progress still reads the key; the last one to finish wipes it.
            let key = state.opening == 0 ? state.key : nil
            if key != nil { state.key = nil }
            return (idle, waiters, key)
        }
        for reader in idle { reader.database.close() }
        for waiter in waiters { waiter.resume(throwing: StoreError.storeClosed()) }
        key?.wipe()
    }

    /// How many readers are open (idle or busy), for tests.
    var openCount: Int { state.withLock { $0.count } }

    /// Whether ``close()`` was called.
    var isClosed: Bool { state.withLock { $0.isClosed } }

    // MARK: Private

    private enum Lending {
        case lend(Reader)
        case open(SecureBytes)
        case wait
    }

    private func checkOut() async throws -> Reader {
        let lending = try state.withLock { state -> Lending in
            if state.isClosed { throw StoreError.storeClosed() }
            if let reader = state.idle.popLast() { return .lend(reader) }
            if state.count < capacity, let key = state.key {
                state.count += 1
                state.opening += 1
                return .open(key)
            }
            return .wait
        }
        switch lending {
        case .lend(let reader):
            return reader
        case .open(let key):
            return try open(with: key)
        case .wait:
            return try await withCheckedThrowingContinuation { continuation in
                state.withLock { state in
                    if state.isClosed {
                        continuation.resume(throwing: StoreError.storeClosed())
                    } else if let reader = state.idle.popLast() {
                        continuation.resume(returning: reader)
                    } else {
                        state.waiters.append(continuation)
                    }
                }
            }
        }
    }

    private func open(with key: SecureBytes) throws -> Reader {
        let opened = Result { try Database(path: path, key: key, configuration: configuration) }
        let (isClosed, keyToWipe) = state.withLock { state -> (Bool, SecureBytes?) in
            state.opening -= 1
            if case .failure = opened { state.count -= 1 }
            if state.isClosed, case .success = opened { state.count -= 1 }
            guard state.isClosed, state.opening == 0, let key = state.key else { return (state.isClosed, nil) }
            state.key = nil
            return (true, key)
        }
        keyToWipe?.wipe()
        let database = try opened.get()
        guard !isClosed else {
            database.close()
            throw StoreError.storeClosed()
        }
        return Reader(database)
    }

    private func checkIn(_ reader: Reader) {
        let keep = state.withLock { state -> Bool in
            if state.isClosed {
                state.count -= 1
                return false
            }
            if let waiter = state.waiters.popFirst() {
                waiter.resume(returning: reader)
            } else {
                state.idle.append(reader)
            }
            return true
        }
        if !keep { reader.database.close() }
    }
}
