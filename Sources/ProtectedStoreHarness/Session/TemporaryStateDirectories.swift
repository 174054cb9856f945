import Foundation
import SecureKeys
#if canImport(Glibc)
import Glibc
#endif

/// The temporary state directories that exist right now, so that a process ended by a signal can remove them
/// first: they hold a device's keybag and a store's key file.
///
/// `protected-store run`, `simulate` and `demo` make theirs here; the tool removes every one still listed when
/// it receives SIGINT or SIGTERM.
public enum TemporaryStateDirectories: Sendable {
    /// The listed directories, and whether ``removeAll()`` ran (then no new one is made). A LockedState, not a
    /// `Mutex`: ThreadSanitizer does not model the futex a `Mutex` waits on.
    private static let live = LockedState((paths: Set<String>(), closed: false))

    /// The process is ending: no temporary state directory is made any more.
    public struct Closed: Error, CustomStringConvertible {
        /// What the error says.
        public var description: String { "the process is ending: no new temporary state directory" }
    }

    /// Creates a fresh directory, readable by its owner only, under the system's temporary folder, and lists it.
    ///
    /// - Parameter prefix: the start of its name (`protected-store-sim`), so a stray one says what left it.
    /// - Returns: its path.
    /// - Throws: what creating the directory throws (an unwritable temporary folder, for instance).
    public static func make(prefix: String) throws -> String {
        let path = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString)"
        // Listed and created under the lock, so that removeAll() never misses one made while it runs.
        try live.withLock { live in
            guard !live.closed else { throw Closed() }
            try SecureFile.createDirectory(at: path)
            live.paths.insert(path)
        }
        return path
    }

    /// Removes a directory made by ``make(prefix:)``, with everything in it, and forgets it.
    ///
    /// - Parameter path: what ``make(prefix:)`` returned.
    public static func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
        live.withLock { _ = $0.paths.remove(path) }
    }

    /// Removes every listed directory: for a signal handler, just before the process ends. No directory is made
    /// after it.
    ///
    /// Work still running may write into a directory while it is removed, so each is first renamed away (that
    /// work then fails to find it, and cannot refill it), then removed, a few times if need be.
    ///
    /// - Returns: how many directories were listed.
    @discardableResult
    public static func removeAll() -> Int {
        let paths = live.withLock { live in
            live.closed = true
            defer { live.paths.removeAll() }
            return live.paths
        }
        for path in paths {
            let doomed = path + ".removing"
            let target = rename(path, doomed) == 0 ? doomed : path
            for _ in 0..<5 where FileManager.default.fileExists(atPath: target) {
                try? FileManager.default.removeItem(atPath: target)
            }
        }
        return paths.count
    }
}
