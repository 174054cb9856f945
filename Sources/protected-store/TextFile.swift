import Foundation
import Glibc

/// Writes a text file with the system's own words for what went wrong, where Foundation would give an
/// `NSCocoaErrorDomain` dump.
enum TextFile {
    /// A file that could not be written: which, and why, in the system's words (`Permission denied`).
    struct WriteFailure: Error, CustomStringConvertible {
        /// The file that could not be written.
        let path: String
        /// Why, from `strerror`.
        let reason: String
        /// `PATH: reason`.
        var description: String { "\(path): \(reason)" }
    }

    /// Writes `text` to `path` whole or not at all: into `PATH.partial`, then renamed over `path`.
    ///
    /// - Throws: ``WriteFailure`` naming the file and the reason.
    static func write(_ text: String, to path: String) throws(WriteFailure) {
        let partial = path + ".partial"
        // O_NOFOLLOW: a link put at PATH.partial would have this write truncate the file it points to.
        let descriptor = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard descriptor >= 0 else { throw WriteFailure(path: path, reason: String(cString: strerror(errno))) }
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let count = bytes[written...].withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                let reason = String(cString: strerror(errno))
                close(descriptor)
                unlink(partial)
                throw WriteFailure(path: path, reason: reason)
            }
            written += count
        }
        guard fsync(descriptor) == 0, close(descriptor) == 0, rename(partial, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(partial)
            throw WriteFailure(path: path, reason: reason)
        }
    }
}
