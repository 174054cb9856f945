internal import DequeModule
internal import Dispatch
import StoreConcurrency

/// The check-out bookkeeping of a pool of connections.
///
/// It keeps the idle elements, how many exist, the most that may, and who waits for one.
///
/// A value kept in its owner's locked state, beside what is the owner's own (how an element is made, and what
/// it needs to be made): the owner decides under its lock whether a check-out takes an idle element, reserves
/// room to make one, or waits, and a returned element goes to the longest waiting check-out before it goes
/// back to the idle ones. An idle element is reused most-recently-returned first.
struct CheckoutPool<Element: Sendable> {
    /// The most elements at once, idle or checked out.
    let capacity: Int
    /// Elements not in use, the most recently returned last.
    private var idle: [Element] = []
    /// Check-outs waiting for an element, first come first served.
    private var waiters: Deque<PoolWaiter<Element>> = []
    /// Elements existing or being made.
    private(set) var count = 0

    /// An empty pool of at most `capacity` elements.
    init(capacity: Int) {
        precondition(capacity >= 1, "a pool has room for at least one element")
        self.capacity = capacity
    }

    /// The most recently returned idle element, taken out of the pool.
    ///
    /// It is `nil` when none is idle.
    mutating func takeIdle() -> Element? {
        idle.popLast()
    }

    /// Counts one element more, about to be made, when the pool has room for it.
    ///
    /// - Returns: whether there was room; nothing is counted when there was not.
    mutating func reserve() -> Bool {
        guard count < capacity else { return false }
        count += 1
        return true
    }

    /// Counts one element fewer.
    ///
    /// The element is one that failed to be made, or that is being closed.
    mutating func forget() {
        count -= 1
    }

    /// Adds a check-out to those waiting for a returned element.
    mutating func wait(_ waiter: PoolWaiter<Element>) {
        waiters.append(waiter)
    }

    /// Hands `element`, returned, to the longest waiting check-out, or keeps it idle when none waits.
    mutating func checkIn(_ element: Element) {
        if let waiter = waiters.popFirst() {
            waiter.resume(returning: element)
        } else {
            idle.append(element)
        }
    }

    /// Empties the pool at its close.
    ///
    /// It returns the idle elements, no longer counted (the caller closes them), and the waiting check-outs
    /// (the caller fails them). Checked-out elements stay counted until they are forgotten.
    mutating func drain() -> (idle: [Element], waiters: [PoolWaiter<Element>]) {
        let drained = idle
        // Not `Array(waiters)` when it is empty: copying an empty Deque writes the count of Swift's shared
        // empty-array storage, which two pools closing at once on two threads did (ThreadSanitizer reports it).
        let waiting: [PoolWaiter<Element>] = waiters.isEmpty ? [] : Array(waiters)
        idle = []
        waiters = []
        count -= drained.count
        return (drained, waiting)
    }
}

/// A check-out waiting for an element.
///
/// It is given one, or `nil` when what it waited for failed (it then looks again). An awaited check-out waits
/// suspended; a synchronous one blocks its thread.
enum PoolWaiter<Element: Sendable> {
    /// An awaiting task's check-out.
    case task(CheckedContinuation<Element?, any Error>)
    /// A synchronous check-out, whose thread sleeps until it is resumed.
    case thread(BlockedCheckout<Element>)

    /// Hands the check-out `element`, or `nil` to have it look again.
    func resume(returning element: Element?) {
        switch self {
        case .task(let continuation): continuation.resume(returning: element)
        case .thread(let blocked): blocked.resume(with: .success(element))
        }
    }

    /// Fails the check-out with `error`.
    func resume(throwing error: any Error) {
        switch self {
        case .task(let continuation): continuation.resume(throwing: error)
        case .thread(let blocked): blocked.resume(with: .failure(error))
        }
    }
}

/// A synchronous check-out's wait for an element.
///
/// Its thread sleeps on a semaphore until the element, or the close's error, is handed over.
final class BlockedCheckout<Element: Sendable>: Sendable {
    private let outcome = LockedState<Result<Element?, any Error>?>(nil)
    private let handedOver = DispatchSemaphore(value: 0)

    /// An empty wait, to add to the pool's waiters before calling ``wait()``.
    init() {}

    /// Hands over `result` and wakes the waiting thread.
    func resume(with result: Result<Element?, any Error>) {
        outcome.withLock { $0 = result }
        handedOver.signal()
    }

    /// Blocks the calling thread until ``resume(with:)``, and returns what it handed over.
    func wait() throws -> Element? {
        handedOver.wait()
        return try outcome.withLock { $0! }.get()
    }
}
