internal import DequeModule
internal import Foundation
internal import Glibc
import StoreConcurrency

/// A thread of the store's own, running one job at a time.
///
/// It is the writer's serial executor, or a reader's task executor. SQLite calls and `fsync` block. Run on
/// these threads they never occupy one of the few threads of Swift's cooperative pool (two on a 2-core
/// machine), so a long write on two stores cannot hold up every other task in the process, such as a read or
/// the main actor's continuations.
///
/// GRDB gives each connection a serial dispatch queue (`SerializedDatabase`); this is the same idea without
/// Dispatch: one `pthread`, named so a debugger, `top -H` or a test can see where database work runs (`comm` is
/// at most 15 bytes on Linux, hence the short names), and a mutex and condition over a queue of jobs. It does
/// not depend on the cooperative pool in any way: a job enqueued here runs even when every pool thread is blocked.
/// It is a thread of its own rather than a `DispatchQueue` because a queue's work runs on Dispatch's worker
/// threads, which carry no name of the store's (`PStore.writer` in `/proc/PID/task/*/comm` is how tests and
/// `top -H` find it), cannot report the thread they run on (``checkIsolated()``), and start and end out of the
/// store's sight, where `StoreThreadCensus` counts each of these threads from before it starts to after its
/// loop ends so the tool can check at exit that none still runs.
///
/// The thread runs until ``stop()`` — the store closing — and then ends as soon as its queue is empty. A job that
/// arrives after that (a call on a closed store, which fails at once) still runs: a short-lived thread of the
/// same name starts for it and ends when the queue is empty again, so nothing waits forever and no thread is
/// left behind.
final class StoreThread: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is in `state`, read and written only with `mutex` held.

    /// What the thread is to the concurrency runtime.
    enum Role: Sendable {
        /// The serial executor of an actor (the coordinator).
        ///
        /// Jobs run isolated to it.
        case writer
        /// A task executor (`withTaskExecutorPreference`).
        ///
        /// The nonisolated code of a read runs on it.
        case reader

        /// The thread's name (`comm`), at most 15 bytes.
        var threadName: String {
            switch self {
            case .writer: "PStore.writer"
            case .reader: "PStore.reader"
            }
        }
    }

    private enum Work {
        case job(UnownedJob)
        case closure(() -> Void)
    }

    private struct State {
        var queue: Deque<Work> = []
        /// Whether a thread is in its loop (or about to enter it).
        var isRunning = false
        /// Whether the thread waits for more work when its queue is empty.
        ///
        /// It does until ``stop()``.
        var keepsRunning = true
        /// The running thread, for ``checkIsolated()``.
        var current: pthread_t?
        /// A thread that left its loop and that nobody joined or detached yet.
        var unjoined: pthread_t?
        /// Callers of ``waitUntilStopped()``.
        var stopWaiters = WaitList()
    }

    let role: Role
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var state = State()

    /// A thread for `role`, started now.
    init(_ role: Role) {
        self.role = role
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
        state.isRunning = true
        Self.startThread(Unmanaged.passRetained(self).toOpaque(), name: role.threadName)
    }

    deinit {
        // No thread runs here: a running thread holds a reference. One that ended unjoined is released.
        if let unjoined = state.unjoined { pthread_detach(unjoined) }
        pthread_cond_destroy(condition)
        condition.deinitialize(count: 1)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `work` on the thread, after what is queued before it.
    func execute(_ work: @escaping @Sendable () -> Void) {
        submit(.closure(work))
    }

    /// Runs `body` on the thread and returns its result to the caller.
    ///
    /// The caller's task waits suspended, its thread free for other work.
    func run<Result: Sendable>(_ body: @escaping @Sendable () throws -> Result) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            execute { continuation.resume(with: Swift.Result { try body() }) }
        }
    }

    /// Runs `body` on a thread of `role` started for it, and returns once that thread has ended.
    ///
    /// The thread is joined, not only asked to stop. The one-shot work of an export, a backup, a restore or a
    /// migration leaves no thread behind it, so an app (or the tool) may exit as soon as the call returns
    /// (``StoreThreadCensus``).
    static func runOnce<Result: Sendable>(
        _ role: Role, _ body: @escaping @Sendable () throws -> Result
    ) async throws -> Result {
        let thread = StoreThread(role)
        let result: Swift.Result<Result, any Error>
        do {
            result = .success(try await thread.run(body))
        } catch {
            result = .failure(error)
        }
        thread.stop()
        await thread.waitUntilStopped()
        return try result.get()
    }

    /// Lets the thread end once its queue is empty. Jobs enqueued later still run (on a short-lived thread).
    func stop() {
        lock()
        state.keepsRunning = false
        pthread_cond_signal(condition)
        unlock()
    }

    /// Returns once the thread has ended and was joined.
    ///
    /// It ends after ``stop()`` and the last queued job.
    func waitUntilStopped() async {
        await withCheckedContinuation { continuation in
            lock()
            if state.isRunning {
                state.stopWaiters.append(continuation)
                unlock()
            } else {
                unlock()
                continuation.resume()
            }
        }
        lock()
        let ended = state.unjoined
        state.unjoined = nil
        unlock()
        // The thread has left its loop and is returning: joining it waits for that return only.
        if let ended { pthread_join(ended, nil) }
    }

    /// Whether the caller runs on this thread.
    var isCurrent: Bool {
        lock()
        defer { unlock() }
        guard let current = state.current else { return false }
        return pthread_equal(current, pthread_self()) != 0
    }

    // MARK: The thread

    /// Queues `work`, starting a thread for it when none runs.
    ///
    /// Nothing here touches `self` once the work can run. The concurrency runtime enqueues on an *unowned*
    /// executor: the job may be the task that holds the last reference to the actor, and so to this object.
    /// That job can run, finish and free this object on the loop's thread before `submit` returns, so every use
    /// of `self` comes before the work is visible — in the queue under the lock, or in the new thread's start.
    private func submit(_ work: Work) {
        lock()
        state.queue.append(work)
        guard !state.isRunning else {
            // A running loop takes it. Signalled once the lock is released, so that the woken thread does not
            // wake only to wait for the lock; the job can run (and free `self`, which the executor's caller
            // need not hold) as soon as the lock is released, so `self` is held until the signal is sent.
            let held = Unmanaged.passRetained(self)
            unlock()
            pthread_cond_signal(condition)
            held.release()
            return
        }
        // A job for a stopped thread: a short-lived one runs it. The ended one is released.
        state.isRunning = true
        let previous = state.unjoined
        state.unjoined = nil
        // The new thread's reference, taken while this object is certainly alive.
        let context = Unmanaged.passRetained(self).toOpaque()
        let name = role.threadName
        unlock()
        if let previous { pthread_detach(previous) }
        Self.startThread(context, name: name)
    }

    /// Starts the thread that runs the loop of the `StoreThread` whose retained reference `context` is.
    ///
    /// The thread releases it when its loop ends. This is static, as it must not touch the object, which the
    /// new thread may already have freed when `pthread_create` returns.
    private static func startThread(_ context: UnsafeMutableRawPointer, name: String) {
        var thread = pthread_t()
        StoreThreadCensus.starting()
        let result = pthread_create(&thread, nil, { context in
            Unmanaged<StoreThread>.fromOpaque(context!).takeRetainedValue().runLoop()
            StoreThreadCensus.ended()
            return nil
        }, context)
        // Out of threads (EAGAIN) the process cannot run the store at all: nothing sensible to fall back on.
        precondition(result == 0, "ProtectedStore could not start its \(name) thread: error \(result)")
    }

    private func runLoop() {
        // Foundation sets the kernel's name of the current thread (`pthread_setname_np`, a GNU extension the
        // Glibc module does not import).
        Thread.current.name = role.threadName
        lock()
        state.current = pthread_self()
        while true {
            while state.queue.isEmpty {
                if !state.keepsRunning {
                    state.isRunning = false
                    state.current = nil
                    state.unjoined = pthread_self()
                    let waiters = state.stopWaiters.takeAll()
                    unlock()
                    waiters.resume()
                    return
                }
                pthread_cond_wait(condition, mutex)
            }
            let work = state.queue.removeFirst()
            unlock()
            switch work {
            case .job(let job):
                switch role {
                case .writer: job.runSynchronously(on: asUnownedSerialExecutor())
                case .reader: job.runSynchronously(on: asUnownedTaskExecutor())
                }
            case .closure(let body):
                body()
            }
            lock()
        }
    }

    private func lock() { pthread_mutex_lock(mutex) }
    private func unlock() { pthread_mutex_unlock(mutex) }
}

// One type for both roles, so that the thread, its queue and its stopping are written once; `role` says which
// executor a job is run on (the writer's thread is only ever an actor's executor, a reader's only a task's).
extension StoreThread: SerialExecutor, TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        submit(.job(UnownedJob(job)))
    }

    func checkIsolated() {
        precondition(isCurrent, "expected to run on the store's \(role.threadName) thread")
    }
}
