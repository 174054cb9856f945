import Synchronization

/// How many of the store's threads exist in this process, started and not yet returned.
///
/// These are the ``StoreThread``s, writers' and readers'.
///
/// A process must not exit while one runs. `exit` runs the libraries' exit handlers, OpenSSL's among them (SQLCipher
/// encrypts with it), and a thread still closing a store then crashes in the freed tables: a shell whose app was
/// left open at the end of its input died with SIGSEGV in libcrypto on CI. An app awaits
/// ``DataController/terminate()`` before it exits; the command-line tool checks this count before it does.
package enum StoreThreadCensus {
    private static let live = Atomic<Int>(0)

    /// The store threads of this process that have started and not yet returned.
    package static var liveCount: Int { live.load(ordering: .acquiring) }

    /// A thread is about to start.
    static func starting() { live.add(1, ordering: .relaxed) }

    /// A thread's last statement.
    ///
    /// The thread returns next, and touches nothing of the library's after this.
    static func ended() { live.subtract(1, ordering: .releasing) }
}
