import Dispatch
import ProtectedStoreHarness
import Glibc

/// Removes the temporary state directories when a signal ends the process.
///
/// The signals are Ctrl-C (SIGINT) or SIGTERM during `run`, `simulate` or `demo`, and SIGPIPE during `demo`
/// (`protected-store demo | head -1`: the reader went away). The directories hold key files. The process then ends
/// with 128 + the signal's number (130, 143, 141), as a shell reports a process ended by that signal. A process ended
/// by SIGKILL cleans nothing up: the next one's ``TemporaryStateDirectories`` sweep removes what it left.
///
/// Only the demo ends when its output goes unread, because its output is its work. `run` and `simulate` leave
/// SIGPIPE ignored (``StandardStreams/prepare()``): a write to a pipe nobody reads fails and is dropped, the
/// scripts or seeds run to their end, and the exit status says whether they held.
///
/// SIGINT and SIGTERM are received by a dispatch source on a queue of its own, not a C signal handler, so the
/// clean-up may allocate and remove files; it runs while the main actor is busy simulating. SIGPIPE cannot be:
/// the kernel sends it to the thread whose write failed, where a dispatch source never sees it (ignored, it is
/// dropped, and the command would go on to its end writing to nobody). A C handler catches it instead and only
/// writes a byte to a pipe (`write(2)` is async-signal-safe); a dispatch read source on that pipe runs the same
/// clean-up.
enum SignalCleanup {
    /// The sources, kept for the life of the process.
    ///
    /// They are written by ``install(brokenPipe:)``, which the commands call first thing on the main actor, before any
    /// work of theirs runs concurrently, and never read elsewhere.
    nonisolated(unsafe) private static var sources: [any DispatchSourceProtocol] = []

    /// Runs a command's work.
    ///
    /// If a signal's clean-up begins meanwhile, the work may fail (its directory is renamed away under it) or end;
    /// either way it then waits for the clean-up to end the process with 130, 143 or 141, instead of ending it first
    /// with another status and a directory half removed.
    ///
    /// - Parameters:
    ///   - endsOnBrokenPipe: whether SIGPIPE ends the command too (the demo, whose output is its work).
    ///   - work: the command's work.
    @MainActor
    static func run(endsOnBrokenPipe: Bool = false, _ work: () async throws -> Void) async throws {
        install(brokenPipe: endsOnBrokenPipe)
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

    /// Starts handling SIGINT and SIGTERM, and SIGPIPE when `brokenPipe`. Calling it again does nothing.
    ///
    /// Not isolated to the main actor on purpose: the handler runs on the signal queue while the main actor is
    /// busy, and a closure formed in a main-actor function would be checked (and trap) for running off it.
    static func install(brokenPipe: Bool) {
        guard sources.isEmpty else { return }
        let queue = DispatchQueue(label: "protected-store.signals")
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)  // the default action would end the process before the source sees it
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { cleanUpAndExit(number) }
            source.resume()
            sources.append(source)
        }
        guard brokenPipe else { return }
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { return }  // SIGPIPE stays ignored
        for end in ends {
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)  // the handler never blocks on a full pipe
        }
        brokenPipeNotice = ends[1]
        let source = DispatchSource.makeReadSource(fileDescriptor: ends[0], queue: queue)
        source.setEventHandler { cleanUpAndExit(SIGPIPE) }
        source.resume()
        sources.append(source)
        signal(SIGPIPE) { _ in
            let errorNumber = errno  // a handler must leave errno as the interrupted code had it
            var byte: UInt8 = 1
            _ = write(brokenPipeNotice, &byte, 1)
            errno = errorNumber
        }
    }

    /// Removes the temporary state directories, says so on standard error, and ends with 128 + `number`.
    private static func cleanUpAndExit(_ number: Int32) -> Never {
        let removed = TemporaryStateDirectories.removeAll()
        let name =
            switch number {
            case SIGINT: "interrupted (SIGINT)"
            case SIGPIPE: "its output was closed (SIGPIPE)"
            default: "terminated (SIGTERM)"
            }
        let message = "\nprotected-store: \(name); removed \(removed) temporary state director\(removed == 1 ? "y" : "ies")\n"
        _ = message.utf8CString.withUnsafeBufferPointer { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
        _exit(128 + number)
    }
}

/// The write end of the pipe the SIGPIPE handler writes to.
///
/// It is set once by ``SignalCleanup/install(brokenPipe:)`` before the handler is installed, and read only by the
/// handler.
nonisolated(unsafe) private var brokenPipeNotice: Int32 = -1
