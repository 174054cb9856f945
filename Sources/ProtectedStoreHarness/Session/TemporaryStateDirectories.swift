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

    /// Creates a fresh directory, readable by its owner only, under the system's temporary folder, and lists it.
    /// Once ``removeAll()`` has run (the process is ending on a signal), it never returns.
    ///
    /// - Parameter prefix: the start of its name (`protected-store-sim`), so a stray one says what left it.
    /// - Returns: its path.
    /// - Throws: what creating the directory throws (an unwritable temporary folder, for instance).
    public static func make(prefix: String) throws -> String {
        let path = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString)"
        // Listed and created under the lock, so that removeAll() never misses one made while it runs.
        let made = try live.withLock { live -> Bool in
            guard !live.closed else { return false }
            try SecureFile.createDirectory(at: path)
            live.paths.insert(path)
            return true
        }
        // The signal clean-up is removing everything and will end the process (`_exit`): wait for it, rather
        // than go on or fail and end the process first, with a directory half removed.
        guard made else { while true { pause() } }
        return path
    }

    /// Whether ``removeAll()`` has run: the process is ending on a signal.
    public static var isEnding: Bool { live.withLock { $0.closed } }

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
