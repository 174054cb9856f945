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

    /// `path` as a `FilePath` hands it to the system: each run of slashes made one, and no trailing slash but `/`.
    ///
    /// It is for the system calls that take the path as a C string (`Stat(_:followTargetSymlink:)`,
    /// `FileDescriptor.open(_:_:options:)`), which then see what `FilePath(path)` would give them: a trailing slash
    /// never makes `lstat` or `O_NOFOLLOW` follow a link. It spares `FilePath`'s checks of every character, which
    /// cost more than the call itself in a debug build, where an app's simulation makes thousands of calls a second.
    package static func forSystemCall(_ path: String) -> String {
        let bytes = path.utf8
        guard bytes.count > 1, bytes.last == UInt8(ascii: "/") || hasDoubledSlash(bytes) else { return path }
        var kept: [UInt8] = []
        kept.reserveCapacity(bytes.count)
        for byte in bytes where byte != UInt8(ascii: "/") || kept.last != UInt8(ascii: "/") { kept.append(byte) }
        if kept.count > 1, kept.last == UInt8(ascii: "/") { kept.removeLast() }
        return String(decoding: kept, as: UTF8.self)
    }

    /// Whether `bytes` hold two slashes in a row.
    ///
    /// A scan of the bytes: `String.contains(_:)` of Foundation (which DiskModel imports) goes through
    /// `NSString`, and this runs at every system call the disk model names.
    private static func hasDoubledSlash(_ bytes: String.UTF8View) -> Bool {
        var previous: UInt8 = 0
        for byte in bytes {
            if byte == UInt8(ascii: "/") && previous == UInt8(ascii: "/") { return true }
            previous = byte
        }
        return false
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
