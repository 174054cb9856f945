import DiskModel
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// The check every folder holding keys passes before anything in it is used.
///
/// The folder must be owned by this user, writable by nobody else, not a symbolic link, and under folders no
/// other user can swap it out of.
///
/// OpenSSH's StrictModes (`safe_path()` in `misc.c`) is the model: a folder another account owns, or may write
/// in, lets that account put its own files there — a fake device agent's socket that receives the passcode, a
/// link in place of the lock file that makes the device truncate a file of the victim's. The folder is opened
/// with `O_DIRECTORY | O_NOFOLLOW` and checked with `fstat` on that descriptor, so the answer is about the folder
/// itself, never about what a link points to. Root is held to the same rule: a folder another user made stays
/// theirs to change, whoever uses it.
///
/// The folders above the checked one may be another's only as `/tmp` is: owned by root (or this user), and
/// writable by others only with the sticky bit, which stops them renaming or removing an entry they do not own.
package enum PrivateDirectory {
    /// Checks the folder at `path` and the folders above it.
    ///
    /// - Parameters:
    ///   - path: the folder (a state directory, a folder in it, the per-user folder of temporary state).
    ///   - ancestors: whether the folders above it are checked too (not needed for a folder inside one that
    ///     passed).
    /// - Throws: `SecureKeysError.Code.insecureStateDirectory` naming the folder, what was found (owner, mode,
    ///   a link) and the fix; `SecureKeysError.Code.ioError` when it cannot be opened or is not a directory.
    package static func check(_ path: String, ancestors: Bool = true) throws {
        let path = withoutTrailingSlashes(path)
        let descriptor: FileDescriptor
        do throws(Errno) {
            descriptor = try systemCall { try FileDescriptor.open(DiskPath.forSystemCall(path), .readOnly, options: [.directory, .noFollow, .closeOnExec]) }
        } catch let code {
            let info: stat
            do throws(Errno) { info = try Stat(DiskPath.forSystemCall(path), followTargetSymlink: false).rawValue } catch _ {
                throw SecureKeysError.io("cannot open the folder", path: path, errno: code)
            }
            if (info.st_mode & S_IFMT) == S_IFLNK {
                throw SecureKeysError.insecureStateDirectory(
                    "it is a symbolic link (to \(linkTarget(path))): a link can be changed to move the keys elsewhere. "
                        + "Give the folder's own path", path: path)
            }
            guard (info.st_mode & S_IFMT) == S_IFDIR else {
                throw SecureKeysError.io("expected a directory at", path: path, errno: ENOTDIR)
            }
            // A folder this user cannot open (EACCES): its owner and mode say why; otherwise the error stands.
            guard code == .permissionDenied else { throw SecureKeysError.io("cannot open the folder", path: path, errno: code) }
            try checkOwnerAndMode(info, path: path)
            throw SecureKeysError.io("cannot open the folder", path: path, errno: EACCES)
        }
        let info: stat
        do throws(Errno) {
            defer { try? descriptor.close() }
            info = try descriptor.stat().rawValue
        } catch {
            throw SecureKeysError.io("cannot stat", path: path, errno: error)
        }
        try checkOwnerAndMode(info, path: path)
        if ancestors { try checkFoldersAbove(path) }
    }

    /// A folder owned by another user, or writable by group or others, is refused.
    private static func checkOwnerAndMode(_ info: stat, path: String) throws {
        let me = geteuid()
        guard info.st_uid == me else {
            let rootToo = me == 0 ? " Root too refuses it: a folder another user made stays theirs to change." : ""
            throw SecureKeysError.insecureStateDirectory(
                "it belongs to \(user(info.st_uid)), not to you, \(user(me)): its owner could put a fake device agent "
                    + "or a link in it. Use a folder you create yourself (protected-store creates a missing one, mode "
                    + "0700), or have its owner remove this one.\(rootToo)",
                path: path)
        }
        guard info.st_mode & 0o022 == 0 else {
            throw SecureKeysError.insecureStateDirectory(
                "other users may write in it (mode \(octal(info.st_mode))): they could put a fake device agent or a "
                    + "link in it. Run `chmod 700 \(path)` (protected-store creates its folders 0700)",
                path: path)
        }
    }

    /// Checks each folder from the one holding `path` up to `/`, links resolved.
    ///
    /// Each must be owned by root or this user, and not writable by others unless sticky. Folders not made yet
    /// are skipped (they will be this user's, 0700). The check starts at the nearest one that exists, so
    /// nothing is created under a folder that fails it.
    ///
    /// - Throws: as ``check(_:ancestors:)``.
    package static func checkFoldersAbove(_ path: String) throws {
        var parent = DiskPath.folder(containing: withoutTrailingSlashes(path))
        func isMissing(_ folder: String) -> Bool {
            do throws(Errno) { _ = try Stat(DiskPath.forSystemCall(folder), followTargetSymlink: false) } catch { return error == .noSuchFileOrDirectory }
            return false
        }
        while isMissing(parent) && parent != "/" && parent != "." {
            parent = DiskPath.folder(containing: parent)
        }
        guard let resolved = realpath(parent, nil) else {
            throw SecureKeysError.io("cannot resolve the folder holding", path: path, errno: errno)
        }
        var folder = String(cString: resolved)
        free(resolved)
        let me = geteuid()
        while true {
            let info: stat
            do throws(Errno) { info = try Stat(DiskPath.forSystemCall(folder)).rawValue } catch {
                throw SecureKeysError.io("cannot stat", path: folder, errno: error)
            }
            if info.st_uid != 0 && info.st_uid != me {
                throw SecureKeysError.insecureStateDirectory(
                    "the folder \(folder) above it belongs to \(user(info.st_uid)), who could rename it away and put "
                        + "theirs in its place. Use a folder under one that only you or root can change, such as your "
                        + "home folder",
                    path: path)
            }
            if info.st_mode & 0o022 != 0 && info.st_mode & S_ISVTX == 0 {
                throw SecureKeysError.insecureStateDirectory(
                    "the folder \(folder) above it may be written by other users (mode \(octal(info.st_mode)), "
                        + "without the sticky bit /tmp has), who could rename it away and put theirs in its place. Use "
                        + "a folder under one that only you or root can change, such as your home folder",
                    path: path)
            }
            guard folder != "/" else { return }
            folder = DiskPath.folder(containing: folder)
        }
    }

    /// `path` without the trailing slashes that would make `open` follow a final link.
    private static func withoutTrailingSlashes(_ path: String) -> String {
        var path = Substring(path)
        while path.count > 1 && path.hasSuffix("/") { path = path.dropLast() }
        return String(path)
    }

    /// `user nobody (uid 65534)`, or `uid 1234` for a user the password database does not know.
    package static func user(_ uid: UInt32) -> String {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &found) == 0, found != nil, let name = entry.pw_name else {
            return "uid \(uid)"
        }
        return "user \(String(cString: name)) (uid \(uid))"
    }

    /// The permission bits in octal, `0777`.
    private static func octal(_ mode: mode_t) -> String {
        let digits = String(mode & 0o7777, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }

    /// Where the link at `path` points, as it is written.
    private static func linkTarget(_ path: String) -> String {
        var buffer = [CChar](repeating: 0, count: 4097)
        let count = readlink(path, &buffer, 4096)
        guard count >= 0 else { return "?" }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
