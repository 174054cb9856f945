import Foundation
import TestSupport
import Testing

@testable import ProtectedStore

/// The concurrency runtime enqueues a job on an actor's executor through an unowned reference: the job may be
/// the task that holds the last reference to the actor, and with it to the executor's ``StoreThread``.
@Suite("A store thread's lifetime", .timeLimit(.minutes(3)))
struct StoreThreadLifetimeTests {
    /// An actor whose executor is a ``StoreThread`` of its own, as the coordinator's is.
    actor ThreadBound {
        private nonisolated let thread: StoreThread
        nonisolated var unownedExecutor: UnownedSerialExecutor { thread.asUnownedSerialExecutor() }

        /// An actor on a writer thread that has already stopped, as a closed store's is: a call on it starts a
        /// short-lived thread.
        static func onStoppedThread() async -> ThreadBound {
            let thread = StoreThread(.writer)
            thread.stop()
            await thread.waitUntilStopped()
            return ThreadBound(thread: thread)
        }

        private init(thread: StoreThread) { self.thread = thread }

        func ping() -> Int { 1 }
    }

    @Test("a task that holds the last reference to an actor on a stopped store thread calls it, 20,000 times under load")
    func lastHolderCallsAnActorOnAStoppedThread() async throws {
        // Two spinning threads: the enqueuing thread is then often preempted just after it started the new thread,
        // which runs the job, ends the task and frees the thread object meanwhile.
        let load = BusyLoad(threads: 2)
        defer { load.stop() }
        var sum = 0
        for _ in 0..<20_000 {
            sum += await Self.pingFromLastHolder(await ThreadBound.onStoppedThread()).value
        }
        #expect(sum == 20_000)
    }

    /// Calls `actor` from a detached task that, once this returns, holds its last reference.
    private static func pingFromLastHolder(_ actor: consuming ThreadBound) -> Task<Int, Never> {
        Task.detached { [actor] in await actor.ping() }
    }
}
