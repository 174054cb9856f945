import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard error, where the tool writes what went wrong, so standard output keeps only results.
enum StandardError {
    /// Writes `line` and a newline, after what standard output holds, so the two read in order at a terminal.
    static func write(_ line: String) {
        fflush(nil)  // flushes every output stream; `stdout` is a global Swift 6 cannot reference safely
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }
}
