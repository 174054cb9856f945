import Foundation
import Glibc
import SystemPackage

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

    /// Writes `text` as it is (`writeAll`: a write a signal interrupted or cut short is retried), dropping the
    /// rest at the first error (`EBADF`, `ENOSPC`, `EPIPE`, …).
    static func writeText(_ text: String) {
        var text = text
        text.withUTF8 { bytes in _ = try? FileDescriptor.standardError.writeAll(bytes) }
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
        // Raw `fcntl(F_GETFD)`: swift-system has no call that asks whether a descriptor is open.
        for descriptor in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO] where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
            if let null = try? FileDescriptor.open("/dev/null", .readWrite), null.rawValue != descriptor {
                _ = try? null.duplicate(as: FileDescriptor(rawValue: descriptor))
                try? null.close()
            }
        }
        signal(SIGPIPE, SIG_IGN)
    }
}
