import Foundation
import Glibc

/// Standard error, where the tool writes what went wrong, so standard output keeps only results.
///
/// A write that fails — standard error closed, on a full disk (`/dev/full`), or a pipe nobody reads — is
/// dropped: output that cannot be written never ends the command or changes what it does (Foundation's
/// `FileHandle.write(_:)` traps on such an error).
enum StandardError {
    /// Writes `line` and a newline, after what standard output holds, so the two read in order at a terminal.
    static func write(_ line: String) {
        fflush(nil)  // flushes every output stream; `stdout` is a global Swift 6 cannot reference safely
        writeText(line + "\n")
    }

    /// Writes `text` as it is, with `write(2)`, retrying a write a signal interrupted or cut short and dropping
    /// the rest at the first error (`EBADF`, `ENOSPC`, `EPIPE`, …).
    static func writeText(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var written = 0
            while written < bytes.count {
                let count = Glibc.write(STDERR_FILENO, bytes.baseAddress! + written, bytes.count - written)
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { return }
                written += count
            }
        }
    }
}

/// The three standard streams as the tool finds them at its start.
enum StandardStreams {
    /// Opens `/dev/null` on each of standard input, output and error that is closed, and ignores SIGPIPE.
    ///
    /// A closed descriptor 0, 1 or 2 would be the next one a file is opened on: what the tool prints would then
    /// go into that file — a key file, the state file, a store — so each gets `/dev/null` first, and what is
    /// written to it goes nowhere. With SIGPIPE ignored, a write to a pipe whose reader went away fails with
    /// `EPIPE` instead of ending the process: the command does its work and its exit status says how that went.
    /// The demo, whose output is its work, catches SIGPIPE itself (``SignalCleanup``).
    static func prepare() {
        for descriptor in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
            let null = open("/dev/null", O_RDWR)
            if null >= 0, null != descriptor {
                _ = dup2(null, descriptor)
                close(null)
            }
        }
        signal(SIGPIPE, SIG_IGN)
    }
}
