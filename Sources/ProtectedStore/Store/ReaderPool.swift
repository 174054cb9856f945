internal import EncryptedSQLite
internal import SecureKeys
import StoreConcurrency

/// The store's read-only connections.
///
/// Reads run on them, beside the writer, and never wait for a write.
///
/// In WAL mode a reader sees the database as of the start of its read transaction, whatever the writer is
/// doing, so a UI read returns while a 50,000-row import is open (measured in `Benchmarks/Peers`). Readers
/// are opened on demand, up to ``capacity``, each keyed with the raw store key (no key derivation per open);
/// an idle reader is reused most-recently-used first, so that consecutive reads find a warm page cache. When
/// all are busy a read waits for the first one returned.
///
/// Each reader has a thread of its own (``StoreThread``, `PStore.reader`): it is opened there, and a read's
/// transaction and `body` run there (the thread is the read task's executor for that time), so SQLite's
/// blocking calls never occupy a thread of Swift's cooperative pool. A waiting read waits suspended, never
/// blocked. A synchronous read (``readNow(_:)``) is the exception its caller chooses: it runs on the caller's
/// thread, and blocks it. One reader is opened when the store attaches, in the background (``openFirstReader(startingOn:)``): the first
/// read finds it open, instead of paying for an open (SQLCipher's key set-up and page 1) while it waits.
///
/// ``close(_:)`` — at the class-A lock, with the writer — closes every idle reader at once, and each busy one as
/// its read ends, each on its own thread, whose thread then ends (``waitUntilThreadsStopped()``); the pool's
/// copy of the store key is wiped as soon as no open is in progress. Reads after it fail with
/// `StoreError.Code.protectedDataUnavailable`, as writes do.
final class ReaderPool: Sendable {
    /// One read-only connection and its thread, lent to one read at a time.
    private final class Reader: @unchecked Sendable {
        // @unchecked Sendable: the pool hands a reader to one read at a time (it is either in `idle`, or
        // held by exactly one `read` or `readNow`), so its connection is used by one thread at a time: its own,
        // or a synchronous read's caller.
        let database: Database
        let thread: StoreThread
        init(_ database: Database, thread: StoreThread) {
            self.database = database
            self.thread = thread
        }
    }

    /// A read waiting for a reader.
    ///
    /// It is given one, or `nil` when the reader it waited for failed to open (it then opens one itself). An
    /// awaited read waits suspended; a synchronous one (``readNow(_:)``) blocks its thread.
    private typealias Waiter = PoolWaiter<Reader>

    private struct State {
        /// The readers, and the reads waiting for one.
        ///
        /// A reader is idle, open or being opened.
        var pool: CheckoutPool<Reader>
        /// Opens in progress (the key must outlive them).
        var opening = 0
        /// Whether the reader opened at attach is still being opened.
        var firstReaderOpening = false
        /// The read waiting for that reader.
        ///
        /// It is one read; the others open readers of their own.
        var firstReaderWaiter: Waiter?
        /// Who waits for that open to end, however it ends (``waitUntilFirstReaderOpened()``).
        var firstReaderWatchers = WaitList()
        /// Every reader thread started and not ended by a failed open.
        ///
        /// ``waitUntilThreadsStopped()`` joins them.
        var threads: [StoreThread] = []
        /// The store key, wiped at close.
        var key: SecureBytes?
        /// Why the pool was closed.
        ///
        /// It is `nil` while the pool is open.
        var closeReason: StoreCloseReason?
        var isClosed: Bool { closeReason != nil }
        /// What a read on the closed pool throws.
        var closedError: StoreError { (closeReason ?? .closedByApp).error }
    }

    /// The most readers open at once.
    let capacity: Int
    /// The store's database file.
    let path: String
    /// How a reader is opened.
    ///
    /// It is read-only, never creating the file.
    let configuration: Database.Configuration
    /// The format the store was opened in.
    ///
    /// It is the one its key source records (`StoreKeyRecord.storeFormat`).
    var storeFormat: StoreFormat { configuration.format }
    private let state: LockedState<State>

    /// A pool for the store at `path`.
    ///
    /// It takes ownership of `key` and wipes it at ``close(_:)``.
    init(path: String, key: SecureBytes, configuration: Database.Configuration, capacity: Int) {
        precondition(capacity >= 1, "a reader pool has at least one reader")
        var readerConfiguration = configuration
        readerConfiguration.readOnly = true
        readerConfiguration.createIfMissing = false
        self.path = path
        self.configuration = readerConfiguration
        self.capacity = capacity
        self.state = LockedState(State(pool: CheckoutPool(capacity: capacity), key: key))
    }

    deinit {
        // A pool dropped without ``close(_:)`` (a test's coordinator): its threads must not outlive it.
        for thread in state.withLock({ $0.threads }) { thread.stop() }
    }

    /// Runs `body` in a read transaction on a reader, on the reader's thread.
    ///
    /// It sees one consistent snapshot of the store, however many statements `body` runs.
    ///
    /// - Parameter trackingTables: whether to collect the tables `body`'s queries read (for observations).
    /// - Returns: what `body` returned, and the tables it read (empty when not tracked).
    /// - Throws: `StoreError.Code.protectedDataUnavailable` once the pool is closed; what `body` throws,
    ///   unchanged; the read transaction's `StoreError`.
    func read<Result>(
        trackingTables: Bool = false, _ body: (Database) throws -> Result
    ) async throws -> (Result, TableRegion) {
        let reader = try await checkOut()
        // The task refers to its preferred executor unowned: the thread must outlive the whole call, including
        // the hop back after `body`, even when the check-in closes the reader (a closed pool) and drops it.
        let thread = reader.thread
        defer { withExtendedLifetime(thread) {} }
        // The closure is nonisolated: with the reader's thread as the task's executor, it runs there.
        return try await withTaskExecutorPreference(thread) {
            // Checked in on the reader's thread, where a reader closed meanwhile is closed.
            defer { checkIn(reader) }
            let database = reader.database
            return try database.transaction(.deferred) {
                trackingTables ? try database.trackingReads { try body(database) } : (try body(database), TableRegion())
            }
        }
    }

    /// Runs `body` in a read transaction on a reader, on the calling thread.
    ///
    /// It sees one consistent snapshot of the store, with no hop to the reader's thread and back.
    ///
    /// For the short reads a UI makes from the main actor, where those two thread wake-ups cost more than the
    /// read (GRDB's synchronous `read` also runs on its caller's thread). The caller's thread is blocked for the
    /// read — and, while every reader is busy, until one is returned; a reader is opened on it when the pool has
    /// room. It never waits for a write. The connection is used by one thread at a time, as every reader's is.
    ///
    /// - Returns: what `body` returned.
    /// - Throws: `StoreError.Code.protectedDataUnavailable` or `StoreError.Code.closed` once the pool is closed;
    ///   what `body` throws, unchanged; the read transaction's `StoreError`.
    func readNow<Result>(_ body: (Database) throws -> Result) throws -> Result {
        let reader = try checkOutNow()
        defer { checkIn(reader) }
        let database = reader.database
        return try database.transaction(.deferred) { try body(database) }
    }

    /// Opens one reader in the background, on its own thread, so that the first read finds it open.
    ///
    /// The store's attach does not wait for it, nor for the start of its thread: that runs on `starter` (the
    /// writer's thread) after what is queued there — the attach itself, which then returns sooner. The reader
    /// counts as opening from now on (``waitUntilFirstReaderOpened()``).
    func openFirstReader(startingOn starter: StoreThread) {
        let key = state.withLock { state -> SecureBytes? in
            guard !state.isClosed, let key = state.key, state.pool.reserve() else { return nil }
            state.opening += 1
            state.firstReaderOpening = true
            return key
        }
        guard let key else { return }
        starter.execute { [self] in
            let thread = startThread()
            thread.execute { [self] in
                openFirstReader(with: key, on: thread)
            }
        }
    }

    /// Opens the reader ``openFirstReader(startingOn:)`` counts as opening, on its `thread`.
    private func openFirstReader(with key: SecureBytes, on thread: StoreThread) {
        let opened = Result { try open(with: key, on: thread) }
        let (waiter, watchers) = state.withLock { state -> (Waiter?, WaitList.Released) in
            state.firstReaderOpening = false
            defer { state.firstReaderWaiter = nil }
            return (state.firstReaderWaiter, state.firstReaderWatchers.takeAll())
        }
        switch opened {
        case .success(let reader):
            if let waiter { waiter.resume(returning: reader) } else { checkIn(reader) }
        case .failure:
            // The read that waited for it opens one itself, and meets the error, if it lasts, there.
            waiter?.resume(returning: nil)
        }
        watchers.resume()
    }

    /// Returns once the reader opened at attach (``openFirstReader(startingOn:)``) is open, or failed to open.
    ///
    /// Its open does file I/O, which the controller's ``DataController/waitUntilIdle()`` waits for, as for
    /// every other. So a test, the simulator and its fault plans see it happen at one point, not beside the
    /// next command.
    func waitUntilFirstReaderOpened() async {
        await state.wait(on: \.firstReaderWatchers) { $0.firstReaderOpening }
    }

    /// Closes idle readers now and busy ones when their reads end, fails waiting reads, and wipes the key.
    func close(_ reason: StoreCloseReason) {
        let (idle, waiters, key) = state.withLock { state -> ([Reader], [Waiter], SecureBytes?) in
            if state.closeReason == nil { state.closeReason = reason }
            let (idle, drainedWaiters) = state.pool.drain()
            var waiters = drainedWaiters
            if let waiter = state.firstReaderWaiter { waiters.append(waiter) }
            state.firstReaderWaiter = nil
            // An open in progress still reads the key; the last one to finish wipes it.
            let key = state.opening == 0 ? state.key : nil
            if key != nil { state.key = nil }
            return (idle, waiters, key)
        }
        for reader in idle { close(reader) }
        let error = reason.error
        for waiter in waiters { waiter.resume(throwing: error) }
        key?.wipe()
    }

    /// Lends the store key to a connection the pool does not own, counted as an open in progress.
    ///
    /// A ``close(_:)`` meanwhile wipes the key only once ``returnKey()`` is called.
    ///
    /// - Throws: the close's error (`StoreError.Code.protectedDataUnavailable` or `StoreError.Code.closed`) after ``close(_:)``.
    func borrowKey() throws -> SecureBytes {
        try state.withLock { state -> SecureBytes in
            guard !state.isClosed, let key = state.key else { throw state.closedError }
            state.opening += 1
            return key
        }
    }

    /// Ends a ``borrowKey()``.
    ///
    /// The key is wiped now when the pool was closed meanwhile and no other open is in progress.
    func returnKey() {
        let keyToWipe = state.withLock { state -> SecureBytes? in
            state.opening -= 1
            guard state.isClosed, state.opening == 0, let key = state.key else { return nil }
            state.key = nil
            return key
        }
        keyToWipe?.wipe()
    }

    /// A copy of the store key, in new guarded memory the caller wipes.
    ///
    /// It is for a connection the pool does not own (a backup's). It is taken under the pool's lock, so a
    /// close never wipes the key half-copied.
    ///
    /// - Throws: the close's error (`StoreError.Code.protectedDataUnavailable` or `StoreError.Code.closed`) after ``close(_:)``.
    func copyOfStoreKey() throws -> SecureBytes {
        try state.withLock { state -> SecureBytes in
            guard !state.isClosed, let key = state.key else { throw state.closedError }
            return try key.withUnsafeBytes { try SecureBytes(copying: $0) }
        }
    }

    /// Returns once every reader's thread has ended.
    ///
    /// That happens after ``close(_:)``, when the last read ended.
    func waitUntilThreadsStopped() async {
        for thread in state.withLock({ $0.threads }) { await thread.waitUntilStopped() }
    }

    /// How many readers are open (idle or busy), for tests.
    var openCount: Int { state.withLock { $0.pool.count } }

    /// Whether ``close(_:)`` was called.
    var isClosed: Bool { state.withLock { $0.isClosed } }

    // MARK: Private

    private enum Lending {
        case lend(Reader)
        case open(SecureBytes)
        case wait
        case waitForFirstReader
    }

    /// What a read gets now, decided under the lock.
    ///
    /// It gets an idle reader, room to open one (counted as opening), or a wait. It waits for the reader the
    /// attach is opening when `waitingForFirstReader` and no read waits for it yet.
    private func lending(waitingForFirstReader: Bool) throws -> Lending {
        try state.withLock { state -> Lending in
            if state.isClosed { throw state.closedError }
            if let reader = state.pool.takeIdle() { return .lend(reader) }
            if waitingForFirstReader, state.firstReaderOpening, state.firstReaderWaiter == nil { return .waitForFirstReader }
            if let key = state.key, state.pool.reserve() {
                state.opening += 1
                return .open(key)
            }
            return .wait
        }
    }

    private func checkOut() async throws -> Reader {
        while true {
            let lending = try lending(waitingForFirstReader: true)
            switch lending {
            case .lend(let reader):
                return reader
            case .open(let key):
                let thread = startThread()
                return try await thread.run { [self] in try open(with: key, on: thread) }
            case .wait, .waitForFirstReader:
                let first = if case .waitForFirstReader = lending { true } else { false }
                let reader = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Reader?, any Error>) in
                    state.withLock { state in
                        if state.isClosed {
                            continuation.resume(throwing: state.closedError)
                        } else if let reader = state.pool.takeIdle() {
                            continuation.resume(returning: reader)
                        } else if first, state.firstReaderOpening, state.firstReaderWaiter == nil {
                            state.firstReaderWaiter = .task(continuation)
                        } else if first {
                            continuation.resume(returning: nil)  // it opened meanwhile: look again
                        } else {
                            state.pool.wait(.task(continuation))
                        }
                    }
                }
                if let reader { return reader }
            }
        }
    }

    /// A reader for ``readNow(_:)``.
    ///
    /// It is an idle one, one opened on the calling thread, or the first one returned.
    private func checkOutNow() throws -> Reader {
        while true {
            let lending = try lending(waitingForFirstReader: false)
            switch lending {
            case .lend(let reader):
                return reader
            case .open(let key):
                return try open(with: key, on: startThread())
            case .wait, .waitForFirstReader:
                let blocked = BlockedCheckout<Reader>()
                let lent = try state.withLock { state -> Reader? in
                    if state.isClosed { throw state.closedError }
                    if let reader = state.pool.takeIdle() { return reader }
                    state.pool.wait(.thread(blocked))
                    return nil
                }
                if let lent { return lent }
                if let reader = try blocked.wait() { return reader }
            }
        }
    }

    private func startThread() -> StoreThread {
        let thread = StoreThread(.reader)
        state.withLock { $0.threads.append(thread) }
        return thread
    }

    /// Opens a reader for `thread` on the calling thread.
    ///
    /// The thread is the reader's own, or a synchronous read's.
    private func open(with key: SecureBytes, on thread: StoreThread) throws -> Reader {
        let opened = Result { try Database(path: path, key: key, configuration: configuration) }
        let (closedError, keyToWipe) = state.withLock { state -> (StoreError?, SecureBytes?) in
            state.opening -= 1
            if case .failure = opened {
                state.pool.forget()
                state.threads.removeAll { $0 === thread }
            }
            if state.isClosed, case .success = opened { state.pool.forget() }
            let closedError = state.isClosed ? state.closedError : nil
            guard state.isClosed, state.opening == 0, let key = state.key else { return (closedError, nil) }
            state.key = nil
            return (closedError, key)
        }
        keyToWipe?.wipe()
        let database: Database
        do {
            database = try opened.get()
        } catch {
            thread.stop()
            throw error
        }
        if let closedError {
            database.close()
            thread.stop()
            throw closedError
        }
        return Reader(database, thread: thread)
    }

    private func checkIn(_ reader: Reader) {
        let keep = state.withLock { state -> Bool in
            if state.isClosed {
                state.pool.forget()
                return false
            }
            state.pool.checkIn(reader)
            return true
        }
        if !keep { close(reader) }
    }

    /// Closes `reader`'s connection on its thread, and lets the thread end.
    private func close(_ reader: Reader) {
        reader.thread.execute { reader.database.close() }
        reader.thread.stop()
    }
}
