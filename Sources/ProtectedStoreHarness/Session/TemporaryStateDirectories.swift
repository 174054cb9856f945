import Foundation
import SecureKeys
import Synchronization

/// The temporary state directories that exist right now, so that a process ended by a signal can remove them
/// first: they hold a device's keybag and a store's key file.
///
/// `protected-store run`, `simulate` and `demo` make theirs here; the tool removes every one still listed when
/// it receives SIGINT or SIGTERM.
public enum TemporaryStateDirectories: Sendable {
    private static let live = Mutex<Set<String>>([])

    /// Creates a fresh directory, readable by its owner only, under the system's temporary folder, and lists it.
    ///
    /// - Parameter prefix: the start of its name (`protected-store-sim`), so a stray one says what left it.
    /// - Returns: its path.
    /// - Throws: what creating the directory throws (an unwritable temporary folder, for instance).
    public static func make(prefix: String) throws -> String {
        let path = NSTemporaryDirectory() + "\(prefix)-\(UUID().uuidString)"
        live.withLock { _ = $0.insert(path) }
        do {
            try SecureFile.createDirectory(at: path)
        } catch {
            live.withLock { _ = $0.remove(path) }
            throw error
        }
        return path
    }

    /// Removes a directory made by ``make(prefix:)``, with everything in it, and forgets it.
    ///
    /// - Parameter path: what ``make(prefix:)`` returned.
    public static func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
        live.withLock { _ = $0.remove(path) }
    }

    /// Removes every listed directory: for a signal handler, just before the process ends.
    ///
    /// Work still running may create a file in a directory while it is being removed, so each removal is tried
    /// a few times.
    ///
    /// - Returns: how many directories were listed.
    @discardableResult
    public static func removeAll() -> Int {
        let paths = live.withLock { paths in
            defer { paths.removeAll() }
            return paths
        }
        for path in paths {
            for _ in 0..<5 where FileManager.default.fileExists(atPath: path) {
                try? FileManager.default.removeItem(atPath: path)
            }
        }
        return paths.count
    }
}
