package import DiskModel
package import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Key files on disk.
///
/// They get private permissions, atomic replacement, and reads that refuse what is not a plain file.
///
/// An atomic write follows the POSIX recipe: write a temporary file in the same directory, `fsync` it,
/// `rename` it over the target, then `fsync` the directory so the rename itself is durable. A crash at any
/// point leaves either the old file or the new one, never a mix.
package enum SecureFile {
    /// The steps of ``writeAtomically(_:to:replacing:syncingFolder:in:)``, in order, where a simulated crash can stop it
    /// (`FaultPoint.atomicWrite(_:)`).
    package enum WriteStep: String, Sendable, CaseIterable {
        case createdTemporary = "created-temporary"
        case wroteTemporary = "wrote-temporary"
        case syncedTemporary = "synced-temporary"
        case renamed = "renamed"
        case syncedDirectory = "synced-directory"
    }

    private static func crashIfRequested(at step: WriteStep, path: String) throws {
        try FaultPoint.reach(.atomicWrite(step), path: path)
    }

    /// The mode of files holding keys, owner read/write only.
    static let fileMode: mode_t = 0o600
    /// The mode of directories holding keys, owner only.
    static let directoryMode: mode_t = 0o700

    /// Creates `path` (and its parents) with mode 0700 when missing, then checks it.
    ///
    /// It checks it as a folder holding keys must be: this user's, writable by nobody else, not a link, under
    /// folders nobody else can swap it out of (``PrivateDirectory``). An existing directory is checked the same
    /// way, and otherwise left as it is.
    ///
    /// - Parameter fileSystem: the file system the folders are made in.
    /// - Throws: `SecureKeysError.Code.insecureStateDirectory` naming the folder, what was found and the fix;
    ///   `SecureKeysError.Code.ioError` when it cannot be created or is not a directory.
    package static func createDirectory(at path: String, in fileSystem: FileSystem) throws {
        try PrivateDirectory.checkFoldersAbove(path)
        try makeDirectories(path, in: fileSystem)
        try PrivateDirectory.check(path, ancestors: false)
    }

    /// `mkdir -p` with mode 0700, each new folder made durable in its parent.
    private static func makeDirectories(_ path: String, in fileSystem: FileSystem) throws {
        if let info = try? Stat(DiskPath.forSystemCall(path), followTargetSymlink: false).rawValue {
            // A link is left for the check to name; anything else that is not a folder is an error here.
            guard (info.st_mode & S_IFMT) == S_IFDIR || (info.st_mode & S_IFMT) == S_IFLNK else {
                throw SecureKeysError.io("expected a directory at", path: path, errno: ENOTDIR)
            }
            return
        }
        let parent = folder(containing: path)
        if parent != path, (try? Stat(DiskPath.forSystemCall(parent), followTargetSymlink: false)) == nil {
            try makeDirectories(parent, in: fileSystem)
        }
        // The new entry is durable only once its parent folder is synced: without this, a power cut right
        // after `device setup` could lose the whole device folder.
        if try DiskIO.makeDirectory(path, mode: directoryMode, in: fileSystem) {
            try DiskIO.syncDirectory(parent, in: fileSystem)
        }
    }

    /// Whether anything (a file, a directory, a link) exists at `path`.
    package static func exists(_ path: String) -> Bool {
        (try? Stat(DiskPath.forSystemCall(path), followTargetSymlink: false)) != nil
    }

    /// The size of the regular file at `path`, or `nil` when nothing is there.
    ///
    /// A file that another library opens by name (SQLite, a store and its side files) is checked with this
    /// first, since that open follows links and blocks on a FIFO.
    ///
    /// Looks with `lstat` and opens nothing: a link is never followed, and a FIFO is never opened (opening
    /// one for reading blocks until a writer comes, reading it blocks for ever).
    ///
    /// - Throws: `SecureKeysError.Code.ioError` naming `path` and what is there instead — a symbolic link (as
    ///   ``read(_:maximumSize:)`` refuses one), a FIFO, a directory, a socket or a device — or when `lstat`
    ///   fails for another reason than a missing file. Nothing is changed.
    package static func regularFileSize(at path: String) throws -> Int? {
        let info: stat
        do throws(Errno) { info = try Stat(DiskPath.forSystemCall(path), followTargetSymlink: false).rawValue } catch {
            if error == .noSuchFileOrDirectory { return nil }
            throw SecureKeysError.io("cannot stat", path: path, errno: error)
        }
        let type = info.st_mode & S_IFMT
        if type == S_IFREG { return Int(info.st_size) }
        if type == S_IFLNK { throw SecureKeysError.io("refusing a symbolic link at", path: path, errno: ELOOP) }
        let what = kindOfFile(type)
        throw SecureKeysError(
            code: .ioError, message: "refusing \(path): it is \(what), not a regular file; it was left as it is", path: path,
            systemErrno: type == S_IFDIR ? EISDIR : ENXIO)
    }

    /// What a file of `type` (`st_mode & S_IFMT`) that is not a regular file is, for a message.
    ///
    /// For example, "a FIFO", "a directory", "a socket" or "a device".
    static func kindOfFile(_ type: mode_t) -> String {
        switch type {
        case S_IFIFO: "a FIFO"
        case S_IFDIR: "a directory"
        case S_IFSOCK: "a socket"
        case S_IFCHR, S_IFBLK: "a device"
        default: "not a plain file"
        }
    }

    /// Reads a whole key file.
    ///
    /// Refuses a symbolic link, a directory or anything else that is not a regular file, a file that other
    /// users can read or write (a key file should be 0600), and a file another user owns.
    ///
    /// - Throws: `SecureKeysError.Code.ioError` (missing, unreadable, not a regular file) or
    ///   `SecureKeysError.Code.insecurePermissions`.
    package static func read(_ path: String, maximumSize: Int = 1 << 20) throws -> [UInt8] {
        // O_NONBLOCK: a FIFO put in a key file's place is refused below instead of blocking the open.
        let descriptor: FileDescriptor
        do throws(Errno) {
            descriptor = try systemCall { try FileDescriptor.open(DiskPath.forSystemCall(path), .readOnly, options: [.noFollow, .closeOnExec, .nonBlocking]) }
        } catch {
            throw SecureKeysError.io(
                error == .tooManySymbolicLinkLevels ? "refusing a symbolic link at" : "cannot open", path: path, errno: error)
        }
        defer { try? descriptor.close() }
        let info: stat
        do throws(Errno) { info = try descriptor.stat().rawValue } catch {
            throw SecureKeysError.io("cannot stat", path: path, errno: error)
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw SecureKeysError.io("not a regular file:", path: path, errno: EISDIR)
        }
        guard info.st_mode & 0o077 == 0 else {
            throw SecureKeysError.insecurePermissions(path: path, mode: UInt32(info.st_mode))
        }
        // Another user's file, even 0600, is one they wrote and may rewrite (planted while the folder was open).
        guard info.st_uid == geteuid() else {
            throw SecureKeysError(
                code: .insecurePermissions,
                message: "\(path) belongs to \(PrivateDirectory.user(info.st_uid)), not to you, \(PrivateDirectory.user(geteuid())): a key file is only read from its owner",
                path: path)
        }
        guard Int(info.st_size) <= maximumSize else {
            throw SecureKeysError.damaged("\(info.st_size) bytes is larger than any key file", path: path)
        }
        return try readAll(from: descriptor, offset: 0, count: Int(info.st_size), path: path)
    }

    /// Reads exactly `count` bytes at `offset` of an open file (`pread`), retrying short and interrupted reads.
    ///
    /// - Throws: `SecureKeysError.Code.ioError` naming `path`, also when the file ends before `count` bytes.
    package static func readAll(from descriptor: FileDescriptor, offset: Int, count: Int, path: String) throws -> [UInt8] {
        do throws(Errno) { return try descriptor.read(exactly: count, at: offset) } catch {
            throw SecureKeysError.io("cannot read", path: path, errno: error)
        }
    }

    /// Reads a file that holds a raw secret straight into guarded memory, zeroing the temporary copy.
    ///
    /// - Throws: as ``read(_:maximumSize:)``.
    package static func readSecret(_ path: String) throws -> SecureBytes {
        var bytes = try read(path, maximumSize: 4096)
        defer { secureZero(&bytes) }
        return try bytes.withUnsafeBytes { try SecureBytes(copying: $0) }
    }

    /// Writes a raw secret to a new file (mode 0600, never replacing one). Only for the simulated device's
    /// hardware key, which stands for a key a real device keeps in its secure element.
    package static func writeSecret(_ secret: SecureBytes, to path: String, in fileSystem: FileSystem) throws {
        var bytes = try secret.withUnsafeBytes { Array($0) }
        defer { secureZero(&bytes) }
        try writeAtomically(bytes, to: path, replacing: false, in: fileSystem)
    }

    /// Writes `bytes` to `path` atomically with mode 0600.
    ///
    /// - Parameters:
    ///   - replacing: whether an existing file may be replaced. Key files are created with `false`
    ///     and are never overwritten; a keybag whose passcode changes is replaced with `true`.
    ///   - syncingFolder: whether the folder is synced after the rename, so the new file survives a crash from
    ///     then on. Without it, a crash before the folder's next sync leaves the previous file whole or the new
    ///     one whole, never a mix: only for a file whose previous version serves as well after a crash, in a
    ///     folder that is synced soon after anyway.
    ///   - fileSystem: the file system to write in.
    /// - Throws: `SecureKeysError.Code.alreadyExists` when `path` exists and `replacing` is false;
    ///   `SecureKeysError.Code.ioError` for any failure, after which the previous file (if any) is intact.
    package static func writeAtomically(
        _ bytes: [UInt8], to path: String, replacing: Bool, syncingFolder: Bool = true, in fileSystem: FileSystem
    ) throws {
        let directory = folder(containing: path)
        let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let file = try DiskIO.open(temporary, flags: O_WRONLY | O_CREAT | O_EXCL, mode: fileMode, in: fileSystem)
        var committed = false
        var crashed = false
        defer {
            if !committed && !crashed { try? DiskIO.unlink(temporary, in: fileSystem) }
        }
        do {
            defer { file.close() }
            do { try crashIfRequested(at: .createdTemporary, path: path) } catch { crashed = true; throw error }
            try file.write(bytes)
            do { try crashIfRequested(at: .wroteTemporary, path: path) } catch { crashed = true; throw error }
            try file.sync()
            do { try crashIfRequested(at: .syncedTemporary, path: path) } catch { crashed = true; throw error }
        }
        if replacing {
            try DiskIO.rename(temporary, to: path, in: fileSystem)
        } else {
            // link(2) fails with EEXIST instead of replacing: a key file is never overwritten.
            try DiskIO.link(temporary, to: path, in: fileSystem)
            try DiskIO.unlink(temporary, in: fileSystem)
        }
        committed = true
        try crashIfRequested(at: .renamed, path: path)
        guard syncingFolder else { return }
        try DiskIO.syncDirectory(directory, purpose: replacing ? .data : .newFileEntry, in: fileSystem)
        try crashIfRequested(at: .syncedDirectory, path: path)
    }

    /// The folder that holds `path` (`.` for a bare file name), the key layer's name for
    /// `DiskPath.folder(containing:)`.
    package static func folder(containing path: String) -> String {
        DiskPath.folder(containing: path)
    }
}

extension FaultPoint {
    /// An atomic write of a key file (``SecureFile/writeAtomically(_:to:replacing:syncingFolder:in:)``) at `step`.
    ///
    /// A plan's path suffix picks the file.
    package static func atomicWrite(_ step: SecureFile.WriteStep) -> FaultPoint { FaultPoint("atomic-write \(step.rawValue)") }
}
