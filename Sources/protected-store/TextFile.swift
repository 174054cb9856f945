import Foundation
import Glibc
import SystemPackage

/// Writes a text file with the system's own words for what went wrong, where Foundation would give an
/// `NSCocoaErrorDomain` dump.
enum TextFile {
    /// A file that could not be written.
    ///
    /// It says which, and why, in the system's words (`Permission denied`).
    struct WriteFailure: Error, CustomStringConvertible {
        /// The file that could not be written.
        let path: String
        /// Why, in the system's words (swift-system's `Errno` description).
        let reason: String
        /// `PATH: reason`.
        var description: String { "\(path): \(reason)" }
    }

    /// Writes `text` to `path` whole or not at all.
    ///
    /// It writes into `PATH.partial`, then renames it over `path`.
    ///
    /// - Throws: ``WriteFailure`` naming the file and the reason.
    static func write(_ text: String, to path: String) throws(WriteFailure) {
        let partial = path + ".partial"
        let descriptor: FileDescriptor
        do {
            // O_NOFOLLOW: a link put at PATH.partial would have this write truncate the file it points to.
            descriptor = try FileDescriptor.open(
                partial, .writeOnly, options: [.create, .truncate, .closeOnExec, .noFollow],
                permissions: FilePermissions(rawValue: 0o644))
        } catch {
            throw WriteFailure(path: path, reason: Self.reason(error))
        }
        do {
            try descriptor.closeAfter {
                _ = try descriptor.writeAll(text.utf8)
                guard fsync(descriptor.rawValue) == 0 else { throw Errno(rawValue: errno) }
            }
            guard rename(partial, path) == 0 else { throw Errno(rawValue: errno) }
        } catch {
            unlink(partial)
            throw WriteFailure(path: path, reason: Self.reason(error))
        }
    }

    /// The system's words for `error`, which is an `Errno` from every call above.
    private static func reason(_ error: any Error) -> String {
        (error as? Errno)?.description ?? "\(error)"
    }
}
