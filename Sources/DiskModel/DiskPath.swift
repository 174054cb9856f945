import Foundation
import SystemPackage

/// Path arithmetic every part of the disk model and the key layer's files share.
package enum DiskPath {
    /// An absolute path without `.`, `..` or doubled slashes (no symbolic links resolved, as SQLite does not).
    package static func normalize(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var parts: [Substring] = []
        for part in absolute.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": _ = parts.popLast()
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    /// The folder that holds `path`.
    ///
    /// It is `/` for a top-level entry, and `.` for a bare file name.
    package static func folder(containing path: String) -> String {
        let folder = FilePath(path).removingLastComponent()
        return folder.isEmpty ? "." : folder.string
    }
}
