/// The tasks waiting until a condition holds, kept in the state that decides the condition.
///
/// The list lives inside its owner's locked state: a waiter is added under the lock after the condition was
/// found not to hold, and the owner takes every waiter under the lock when the condition comes to hold, then
/// resumes them once the lock is released (a resumed task may be enqueued on the very executor that holds it).
package struct WaitList: Sendable {
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// An empty list.
    package init() {}

    /// Whether no task waits.
    package var isEmpty: Bool { waiters.isEmpty }

    /// Adds a waiter, resumed by a later ``takeAll()``.
    package mutating func append(_ waiter: CheckedContinuation<Void, Never>) {
        waiters.append(waiter)
    }

    /// Empties the list.
    ///
    /// Resume what it returns once the owner's lock is released.
    package mutating func takeAll() -> Released {
        defer { waiters.removeAll() }
        return Released(waiters: waiters)
    }

    /// Waiters taken from a list, to resume outside the lock.
    package struct Released: Sendable {
        fileprivate let waiters: [CheckedContinuation<Void, Never>]

        /// Nobody, for a path where the condition did not come to hold.
        package static let none = Released(waiters: [])

        /// Resumes every waiter taken.
        package func resume() {
            for waiter in waiters { waiter.resume() }
        }
    }
}

extension LockedState {
    /// Returns once `mustWait` is false.
    ///
    /// It is checked under the lock, and if it holds the caller joins the list at `list`, resumed by the owner's
    /// ``WaitList/takeAll()``.
    package func wait(on list: WritableKeyPath<Value, WaitList>, while mustWait: (Value) -> Bool) async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let waiting = withLock { value -> Bool in
                guard mustWait(value) else { return false }
                value[keyPath: list].append(waiter)
                return true
            }
            if !waiting { waiter.resume() }
        }
    }
}
