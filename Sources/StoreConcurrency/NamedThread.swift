import Foundation
import Glibc

/// A thread started with a name, which its starter can wait for.
///
/// The package's one way to run blocking work outside Swift's cooperative pool — an agent's client
/// connection, the agent client's reader, the session lock's event loop, the signal reader — other than the
/// store's own `StoreThread`. The name (`comm`: at most 15 bytes on Linux, a longer one is cut) shows in
/// `top -H`, a debugger and `/proc/PID/task/*/comm`. A thread nobody joins is detached when its handle is
/// released: it runs to its end and then frees what it holds.
package final class NamedThread: Sendable {
    /// Why a thread could not be started.
    ///
    /// It holds `pthread_create`'s error number (`EAGAIN` when out of threads).
    package struct StartFailure: Error, Sendable {
        /// The error number.
        package let errno: Int32
    }

    /// The thread's name, as given.
    package let name: String
    private let thread: pthread_t
    /// Whether ``join()`` has run, or the handle detached the thread.
    ///
    /// A thread is joined or detached once.
    private let settled = LockedState(false)

    /// Starts `body` on a new thread named `name`.
    ///
    /// - Throws: ``StartFailure`` when the system cannot start a thread.
    package init(name: String, _ body: @escaping @Sendable () -> Void) throws(StartFailure) {
        self.name = name
        let context = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var created = pthread_t()
        let result = pthread_create(&created, nil, { context in
            let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
            // Foundation sets the kernel's name of the current thread (`pthread_setname_np`, a GNU extension the
            // Glibc module does not import).
            Thread.current.name = String(decoding: start.name.utf8.prefix(15), as: UTF8.self)
            start.body()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Start>.fromOpaque(context).release()
            throw StartFailure(errno: result)
        }
        thread = created
    }

    /// Whether the calling code runs on this thread.
    package var isCurrent: Bool { pthread_equal(thread, pthread_self()) != 0 }

    /// Waits until the thread has ended.
    ///
    /// Called on the thread itself, it cannot wait for itself. It detaches the thread instead, which then ends when its
    /// body returns.
    ///
    /// - Returns: `true` when the thread has ended; `false` when this was its own thread (detached) or it was
    ///   joined before.
    @discardableResult
    package func join() -> Bool {
        guard settle() else { return false }
        if isCurrent {
            pthread_detach(thread)
            return false
        }
        pthread_join(thread, nil)
        return true
    }

    /// Marks the thread joined or detached.
    ///
    /// Returns `false` when it already was.
    private func settle() -> Bool {
        settled.withLock { settled in
            defer { settled = true }
            return !settled
        }
    }

    deinit {
        if settle() { pthread_detach(thread) }
    }

    /// What the new thread runs, handed to it through `pthread_create`'s context pointer.
    private final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
}
