import Foundation

/// A value guarded by a lock.
///
/// This is the one way this project shares mutable state between threads.
///
/// Built on `NSLock` (a pthread mutex) rather than `Synchronization.Mutex`: on Linux the latter waits on a
/// futex that ThreadSanitizer does not model, so every access under it is reported as a race, and the suite
/// must stay clean under `--sanitize=thread`.
package final class LockedState<Value>: @unchecked Sendable {
    // @unchecked Sendable: `value` is only touched inside `withLock`, under `lock`.
    private var value: Value
    private let lock = NSLock()

    package init(_ value: Value) { self.value = value }

    /// Runs `body` with exclusive access to the value.
    ///
    /// Keep it short, and do not call out to unknown code.
    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
