import Foundation

/// Threads that spin until stopped, so a race that shows only when the scheduler is under load shows in a test.
///
/// A lifetime race between two threads (one frees what the other still reads) is rare on a quiet machine: the
/// reading thread is rarely preempted in the window. Busy threads beside it make preemption there common.
public final class BusyLoad: Sendable {
    private let running = LockedFlag()

    /// Starts `threads` spinning threads.
    public init(threads: Int) {
        running.set(true)
        for _ in 0..<threads {
            let running = self.running
            Thread.detachNewThread {
                var counter: UInt64 = 0
                while running.get() {
                    for _ in 0..<10_000 { counter &+= 1 }
                }
                withExtendedLifetime(counter) {}
            }
        }
    }

    /// Stops the threads (they end at their next look at the flag).
    public func stop() { running.set(false) }

    deinit { stop() }
}

/// A Boolean behind a lock.
private final class LockedFlag: @unchecked Sendable {  // `value` is only touched with `lock` held
    private let lock = NSLock()
    private var value = false
    func get() -> Bool { lock.withLock { value } }
    func set(_ newValue: Bool) { lock.withLock { value = newValue } }
}
