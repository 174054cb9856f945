import Dispatch
import ProtectedStoreHarness
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Ctrl-C (SIGINT) or SIGTERM during `run`, `simulate` or `demo`: remove the temporary state directories —
/// they hold key files — then end with 128 + the signal's number (130, 143), as a shell reports a process
/// ended by that signal.
///
/// The signals are received by a dispatch source on a queue of its own, not a C signal handler, so the
/// clean-up may allocate and remove files; it runs while the main actor is busy simulating.
enum SignalCleanup {
    /// The sources, kept for the life of the process. Written by ``install()``, which the commands call first
    /// thing on the main actor, before any work of theirs runs concurrently; never read elsewhere.
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

    /// Runs a command's work. If a signal's clean-up begins meanwhile, the work may fail (its directory is
    /// renamed away under it) or end; either way it then waits for the clean-up to end the process with 130 or
    /// 143, instead of ending it first with another status and a directory half removed.
    @MainActor
    static func run(_ work: () async throws -> Void) async throws {
        install()
        do {
            try await work()
        } catch {
            if TemporaryStateDirectories.isEnding { parkForever() }
            throw error
        }
        if TemporaryStateDirectories.isEnding { parkForever() }
    }

    private static func parkForever() -> Never {
        while true { pause() }
    }

    /// Starts handling SIGINT and SIGTERM. Calling it again does nothing.
    ///
    /// Not isolated to the main actor on purpose: the handler runs on the signal queue while the main actor is
    /// busy, and a closure formed in a main-actor function would be checked (and trap) for running off it.
    static func install() {
        guard sources.isEmpty else { return }
        let queue = DispatchQueue(label: "protected-store.signals")
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)  // the default action would end the process before the source sees it
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                let removed = TemporaryStateDirectories.removeAll()
                let name = number == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)"
                let message = "\nprotected-store: \(name); removed \(removed) temporary state director\(removed == 1 ? "y" : "ies")\n"
                _ = message.utf8CString.withUnsafeBufferPointer { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
                _exit(128 + number)
            }
            source.resume()
            sources.append(source)
        }
    }
}
