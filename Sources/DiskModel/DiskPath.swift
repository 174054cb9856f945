import Foundation

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
    ///
    /// It is `FilePath(path).removingLastComponent()` (doubled slashes collapse, `.` and `..` stay), worked out on
    /// the string: the disk model asks for it at every file it records, and swift-system's checks of a `FilePath`
    /// cost more than the rest of a simulated step in a debug build.
    package static func folder(containing path: String) -> String {
        let components = path.split(separator: "/", omittingEmptySubsequences: true).dropLast()
        let folder = (path.hasPrefix("/") ? "/" : "") + components.joined(separator: "/")
        return folder.isEmpty ? "." : folder
    }
}
