import Testing

@testable import ProtectedStore
import StoreConcurrency

@Suite("CheckoutPool", .timeLimit(.minutes(1)))
struct CheckoutPoolTests {
    @Test("reserve counts elements up to the capacity and no further; forget makes room again")
    func reserveStopsAtCapacity() {
        var pool = CheckoutPool<Int>(capacity: 2)
        let reserved = (0..<3).map { _ in pool.reserve() }
        #expect(reserved == [true, true, false])
        #expect(pool.count == 2)
        pool.forget()
        #expect(pool.count == 1)
        let again = pool.reserve()
        #expect(again)
    }

    @Test("an idle element is reused most recently returned first")
    func idleReusedMostRecentFirst() {
        var pool = CheckoutPool<Int>(capacity: 3)
        #expect(pool.takeIdle() == nil)
        pool.checkIn(1)
        pool.checkIn(2)
        #expect(pool.takeIdle() == 2)
        #expect(pool.takeIdle() == 1)
        #expect(pool.takeIdle() == nil)
    }

    @Test("a returned element goes to the longest waiting check-out before it goes back to the idle ones")
    func returnedElementGoesToFirstWaiter() throws {
        var pool = CheckoutPool<Int>(capacity: 1)
        let first = BlockedCheckout<Int>()
        let second = BlockedCheckout<Int>()
        pool.wait(.thread(first))
        pool.wait(.thread(second))
        pool.checkIn(7)
        #expect(pool.takeIdle() == nil)
        // The one left waiting is failed, so that neither wait below blocks, whichever got the element.
        let (_, left) = pool.drain()
        #expect(left.count == 1)
        for waiter in left { waiter.resume(throwing: Closed()) }
        #expect(try first.wait() == 7)
        #expect(throws: Closed.self) { try second.wait() }
        pool.checkIn(9)
        #expect(pool.takeIdle() == 9)
    }

    @Test("drain takes the idle elements out of the count and hands back every waiter, who can then be failed")
    func drainEmptiesThePool() async throws {
        var pool = CheckoutPool<Int>(capacity: 3)
        for element in [1, 2, 3] {
            let reserved = pool.reserve()
            #expect(reserved)
            pool.checkIn(element)
        }
        _ = pool.takeIdle()  // 3 is checked out and stays counted
        let (idle, noWaiters) = pool.drain()
        #expect(idle == [1, 2])
        #expect(noWaiters.isEmpty)
        #expect(pool.count == 1)
        #expect(pool.takeIdle() == nil)

        let blocked = BlockedCheckout<Int>()
        pool.wait(.thread(blocked))
        let (_, waiters) = pool.drain()
        #expect(waiters.count == 1)
        for waiter in waiters { waiter.resume(throwing: Closed()) }
        #expect(throws: Closed.self) { try blocked.wait() }
    }

    @Test("a task waiting for an element resumes with the element returned")
    func taskWaiterResumes() async throws {
        let pool = LockedState(CheckoutPool<Int>(capacity: 1))
        let element = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int?, any Error>) in
            pool.withLock { $0.wait(.task(continuation)) }
            pool.withLock { $0.checkIn(5) }
        }
        #expect(element == 5)
    }
}

/// The error a drained pool's waiters are failed with here.
private struct Closed: Error {}
