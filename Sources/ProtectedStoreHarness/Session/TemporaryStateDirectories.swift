import Foundation
import SecureKeys
import StoreConcurrency
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// The temporary state directories that exist right now.
///
/// A process ended by a signal can remove them first, and the next process can remove what a killed one left. They
/// hold a device's keybag and a store's key file.
///
/// `protected-store run`, `simulate` and `demo` make theirs in a folder of this user's,
/// `$TMPDIR/protected-store-<uid>/` (mode 0700, checked as a state directory is: this user's, writable by
/// nobody else). Each directory, `<prefix>-<pid>-<random>`, has a lock file beside it, `<name>.lock`, that its
/// process holds (`flock`) for as long as it lives; the kernel lets go of it however the process ends, SIGKILL
/// included. The first directory a process makes sweeps the folder: a directory whose lock nobody holds is a
/// dead process's, and is removed; one whose owner lives is never touched. The lock, not the process id, is
/// the test — an id can be reused by an unrelated process — and the id is only the fallback for a directory
/// whose lock file is gone.
///
/// The tool removes every directory still listed when it receives SIGINT or SIGTERM, and the demo when it receives
/// SIGPIPE.
public enum TemporaryStateDirectories: Sendable {
    /// The listed directories, each with the descriptor holding its lock.
    ///
    /// It also holds whether ``removeAll()`` ran (then no new one is made), and whether this process has swept the
    /// folder. It is a LockedState, not a `Mutex`, because ThreadSanitizer does not model the futex a `Mutex` waits
    /// on.
    private static let live = LockedState((paths: [String: Int32](), closed: false, swept: false))

    /// The folder of this user's temporary state directories, `$TMPDIR/protected-store-<uid>`.
    public static var folder: String {
        var temporary = NSTemporaryDirectory()
        if !temporary.hasSuffix("/") { temporary += "/" }
        return temporary + "protected-store-\(geteuid())"
    }

    /// Creates a fresh directory, readable by its owner only, in ``folder``, and lists it. The first call in a
    /// process first removes the directories of processes that ended without removing theirs (killed).
    /// Once ``removeAll()`` has run (the process is ending on a signal), it never returns.
    ///
    /// - Parameter prefix: the start of its name (`protected-store-sim`), so a stray one says what left it.
    /// - Returns: its path.
    /// - Throws: `SecureKeysError` with `insecure-state-directory` when ``folder`` is another user's or writable
    ///   by others; what creating the directory throws (an unwritable temporary folder, for instance).
    public static func make(prefix: String) throws -> String {
        let folder = self.folder
        // Listed and created under the lock, so that removeAll() never misses one made while it runs.
        let made = try live.withLock { live -> String? in
            guard !live.closed else { return nil }
            try SecureFile.createDirectory(at: folder, in: .real)
            if !live.swept {
                live.swept = true
                sweep(folder)
            }
            let path = folder + "/\(prefix)-\(getpid())-\(String(UInt64.random(in: 0...UInt64.max), radix: 16))"
            let lock = try holdLock(path + ".lock")
            do {
                try SecureFile.createDirectory(at: path, in: .real)
            } catch {
                unlink(path + ".lock")
                close(lock)
                throw error
            }
            live.paths[path] = lock
            return path
        }
        // The signal clean-up is removing everything and will end the process (`_exit`): wait for it, rather
        // than go on or fail and end the process first, with a directory half removed.
        guard let made else { while true { pause() } }
        return made
    }

    /// Whether ``removeAll()`` has run, so the process is ending on a signal.
    public static var isEnding: Bool { live.withLock { $0.closed } }

    /// Removes a directory made by ``make(prefix:)``, with everything in it, then its lock file, and forgets it.
    ///
    /// - Parameter path: what ``make(prefix:)`` returned.
    public static func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
        // What could not be removed stays with its lock let go: the next process's sweep removes it.
        guard let lock = live.withLock({ $0.paths.removeValue(forKey: path) }) else { return }
        if !SecureFile.exists(path) { unlink(path + ".lock") }
        close(lock)
    }

    /// Removes every listed directory.
    ///
    /// It is for a signal handler, just before the process ends. No directory is made after it.
    ///
    /// Work still running may write into a directory while it is removed, so each is first renamed away (that
    /// work then fails to find it, and cannot refill it), then removed, a few times if need be. The locks stay
    /// held until the process ends: a directory this could not remove is the next process's to sweep.
    ///
    /// - Returns: how many directories were listed.
    @discardableResult
    public static func removeAll() -> Int {
        let paths = live.withLock { live in
            live.closed = true
            defer { live.paths.removeAll() }
            return Array(live.paths.keys)
        }
        for path in paths {
            let doomed = path + ".removing"
            let target = rename(path, doomed) == 0 ? doomed : path
            for _ in 0..<5 where SecureFile.exists(target) {
                try? FileManager.default.removeItem(atPath: target)
            }
            if !SecureFile.exists(target) { unlink(path + ".lock") }
        }
        return paths.count
    }

    /// A new lock file at `path`, created and locked by this process.
    ///
    /// It is held until the process ends or the directory is removed.
    private static func holdLock(_ path: String) throws -> Int32 {
        // Raw descriptors, here and in the sweep: each is held for an `flock`, which swift-system has no call for,
        // and closed by the signal clean-up, where only async-signal-safe calls (`close`, `unlink`) may run.
        let descriptor = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw SecureKeysError.io("cannot create the lock file", path: path, errno: errno) }
        var result: Int32
        repeat { result = flock(descriptor, LOCK_EX) } while result != 0 && errno == EINTR
        guard result == 0 else {
            let code = errno
            unlink(path)
            close(descriptor)
            throw SecureKeysError.io("cannot lock", path: path, errno: code)
        }
        return descriptor
    }

    /// Removes, in `folder`, the directories (and lock files) of processes that have ended.
    ///
    /// It never removes one whose process holds its lock. It works best effort: what cannot be removed now is tried
    /// again by the next process.
    ///
    /// - Returns: the names of the directories removed.
    @discardableResult
    package static func sweep(_ folder: String) -> [String] {
        var removed: [String] = []
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        for name in names.sorted() {
            let isLock = name.hasSuffix(".lock")
            let base = isLock ? String(name.dropLast(5)) : name.hasSuffix(".removing") ? String(name.dropLast(9)) : name
            guard let owner = processID(in: base) else { continue }  // not one of ours: left alone
            let lockPath = folder + "/" + base + ".lock"
            if isLock {
                // A lock without its directory (the process ended between the two): removed once its process is
                // gone — the id guards the moment between a new lock file's creation and its `flock`.
                guard !SecureFile.exists(folder + "/" + base), !SecureFile.exists(folder + "/" + base + ".removing"),
                    !isAlive(owner), let descriptor = lockIfFree(lockPath)
                else { continue }
                unlink(lockPath)
                close(descriptor)
                continue
            }
            guard (try? Stat(FilePath(folder + "/" + name), followTargetSymlink: false))?.type == .directory else { continue }
            let lock = open(lockPath, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
            let ownerGone: Bool
            if lock >= 0 {
                var result: Int32
                repeat { result = flock(lock, LOCK_EX | LOCK_NB) } while result != 0 && errno == EINTR
                ownerGone = result == 0
            } else {
                ownerGone = errno == ENOENT && !isAlive(owner)
            }
            if ownerGone {
                try? FileManager.default.removeItem(atPath: folder + "/" + name)
                if !SecureFile.exists(folder + "/" + name) {
                    removed.append(name)
                    if lock >= 0 { unlink(lockPath) }
                }
            }
            if lock >= 0 { close(lock) }
        }
        return removed
    }

    /// The process id in a name `<prefix>-<pid>-<hex>`, or `nil` for a name of another shape.
    private static func processID(in name: String) -> pid_t? {
        let parts = name.split(separator: "-")
        guard parts.count >= 3, parts.last!.allSatisfy(\.isHexDigit), let id = pid_t(parts[parts.count - 2]), id > 0
        else { return nil }
        return id
    }

    /// The lock at `path`, taken without waiting, or `nil` when another process holds it (or it cannot be opened).
    private static func lockIfFree(_ path: String) -> Int32? {
        let descriptor = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
        guard descriptor >= 0 else { return nil }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
    }

    /// Whether a process with id `id` exists.
    ///
    /// With `EPERM` it does, as another user's.
    private static func isAlive(_ id: pid_t) -> Bool {
        kill(id, 0) == 0 || errno == EPERM
    }
}
