import Foundation
import StoreConcurrency
import Testing

/// `NamedThread`: the thread runs under its name, `join()` waits for it, and a handle released or joined on
/// its own thread detaches it.
@Suite struct NamedThreadTests {
    /// The calling thread's name, as the kernel knows it.
    static func kernelName() -> String {
        let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
        return comm.trimmingCharacters(in: .newlines)
    }

    @Test func threadRunsUnderItsName() throws {
        let seen = LockedState<String?>(nil)
        let thread = try NamedThread(name: "PStore.test") { seen.withLock { $0 = Self.kernelName() } }
        #expect(thread.join())
        #expect(seen.withLock { $0 } == "PStore.test")
    }

    @Test func longNameIsCutTo15Bytes() throws {
        let seen = LockedState<String?>(nil)
        let thread = try NamedThread(name: "PStore.a-name-too-long") { seen.withLock { $0 = Self.kernelName() } }
        thread.join()
        #expect(seen.withLock { $0 } == "PStore.a-name-t")
    }

    @Test func joinReturnsOnlyOnceTheBodyHasEnded() throws {
        let ended = LockedState(false)
        let thread = try NamedThread(name: "PStore.test") {
            usleep(100_000)
            ended.withLock { $0 = true }
        }
        #expect(thread.join())
        #expect(ended.withLock { $0 })
        #expect(!thread.join(), "a thread is joined once")
    }

    @Test func joinOnItsOwnThreadDetachesInsteadOfWaiting() throws {
        let handle = LockedState<NamedThread?>(nil)
        let joinedItself = LockedState<Bool?>(nil)
        let done = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        let thread = try NamedThread(name: "PStore.test") {
            started.wait()
            let own = handle.withLock { $0 }
            joinedItself.withLock { $0 = own?.join() }
            done.signal()
        }
        handle.withLock { $0 = thread }
        started.signal()
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(joinedItself.withLock { $0 } == false)
        #expect(!thread.join(), "detached on its own thread, it cannot be joined after")
        handle.withLock { $0 = nil }
    }

    @Test func releasedHandleLeavesTheThreadRunningToItsEnd() throws {
        let done = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        do {
            _ = try NamedThread(name: "PStore.test") {
                release.wait()
                done.signal()
            }
        }
        release.signal()
        #expect(done.wait(timeout: .now() + 30) == .success)
    }
}
