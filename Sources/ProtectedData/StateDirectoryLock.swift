package import DiskModel
import Foundation
import Glibc
import SecureKeys
import StoreConcurrency
import SystemPackage

/// Exclusive ownership of a state directory.
///
/// One process at a time runs a device on it.
///
/// Two processes that each booted a device on one directory would each keep their own passcode counter and
/// keys in memory and overwrite each other's state file: a second shell could reset the wrong-passcode count
/// the first one had persisted. The lock is an `flock(2)` on `<directory>/owner.lock`, held through an open
/// file description for as long as the owner lives; the kernel drops it when the process ends, however it
/// ends, so a crash never leaves a directory locked. The file holds the owner's process id in decimal, for
/// the message of whoever is refused, and on a second line `device-agent` when the owner is a ``DeviceAgent``
/// (so a refusal can say to go through it, and a client starting beside an agent can wait for its socket).
///
/// `flock` locks conflict between open file descriptions, not processes: a second ``acquire(_:as:)`` in the
/// process that holds the lock is refused too, as a second device on the same directory must be.
public final class StateDirectoryLock: Sendable {
    /// The lock file's name in the state directory.
    package static let fileName = "owner.lock"

    /// Who owns a state directory.
    public enum Owner: Sendable, Hashable {
        /// A process that runs the device itself (a shell, a script, an app in a test).
        case process
        /// A device agent, which serves the device to other processes.
        case deviceAgent
    }

    /// The lock file's second line for a device agent.
    private static let agentMark = "device-agent"

    /// The state directory this lock owns.
    public let directory: String
    /// The descriptor that holds the `flock`, or `nil` once released.
    private let descriptor: LockedState<FileDescriptor?>

    private init(directory: String, descriptor: FileDescriptor) {
        self.directory = directory
        self.descriptor = LockedState(descriptor)
    }

    deinit { release() }

    /// The lock file of `directory`.
    package static func path(in directory: String) -> String { directory + "/" + fileName }

    /// Takes the lock of `directory`, creating the directory (mode 0700) and its lock file when missing, and
    /// writes this process's id into the lock file.
    ///
    /// On a read-only file system an existing lock file is locked without writing the id (a holder that
    /// cannot write it is named as "another process").
    ///
    /// - Parameters:
    ///   - directory: the state directory.
    ///   - owner: who takes it, written into the lock file for the messages of whoever is refused.
    /// - Returns: the lock, held until ``release()`` or until it is freed.
    /// - Throws: ``DeviceError`` with code `DeviceError.Code.stateInUse` naming the holder's process id when
    ///   another process — or another owner in this one — holds it; `SecureKeysError` with
    ///   `insecure-state-directory` when the directory, a folder in it (`device/`, `hardware/`, `agent/`) or the
    ///   lock file is another user's, writable by others or a link; `io-error` when the directory or the lock
    ///   file cannot be created or locked.
    public static func acquire(_ directory: String, as owner: Owner = .process) throws -> StateDirectoryLock {
        try acquire(directory, as: owner, in: .real)
    }

    /// Takes the lock on `directory`, as ``acquire(_:as:)`` does, making the directory in `fileSystem`.
    package static func acquire(_ directory: String, as owner: Owner = .process, in fileSystem: FileSystem) throws -> StateDirectoryLock {
        // The directory and every folder the device keeps in it are this user's and nobody else's, before a
        // file in them is opened (invariant 10).
        try SecureFile.createDirectory(at: directory, in: fileSystem)
        let layout = DeviceLayout(root: directory, fileSystem: fileSystem)
        for folder in [layout.deviceDirectory, layout.hardwareDirectory, layout.agentDirectory] where SecureFile.exists(folder) {
            try PrivateDirectory.check(folder, ancestors: false)
        }
        let path = path(in: directory)
        // A plain `open`, not `DiskIO`: the lock file is no part of the device's durable state, and the
        // simulated disk leaves `*.lock` files alone (a power cut must not swap the inode under a held lock).
        // O_NOFOLLOW: a link in its place would have the lock truncate the file it points to.
        let options: FileDescriptor.OpenOptions = [.closeOnExec, .noFollow, .nonBlocking]
        // On a read-only mount (or file) the existing lock file is locked all the same — `flock` needs no write
        // access, and a writable mount of the same directory elsewhere sees the lock — only without an id.
        var writable = true
        let descriptor: FileDescriptor
        do {
            do {
                descriptor = try FileDescriptor.open(
                    path, .readWrite, options: options.union(.create), permissions: .ownerReadWrite)
            } catch let cannotWrite as Errno where cannotWrite == .readOnlyFileSystem || cannotWrite == .permissionDenied {
                writable = false
                do {
                    descriptor = try FileDescriptor.open(path, .readOnly, options: options)
                } catch Errno.noSuchFileOrDirectory {
                    // No lock file to fall back on (a new state directory there): the cause is the read-only
                    // mount or the missing permission, not the missing file the fallback found.
                    throw SecureKeysError(
                        code: .ioError,
                        message: "cannot create the lock file \(path): \(cannotWrite); a state "
                            + "directory is owned through its lock file, so it must be writable (a read-only mount cannot "
                            + "hold a new one)",
                        path: path, systemErrno: cannotWrite.rawValue)
                }
            }
        } catch Errno.tooManySymbolicLinkLevels {
            throw SecureKeysError.insecureStateDirectory(
                "it is a symbolic link; the lock file is never opened through one (it would truncate the file it "
                    + "points to). Remove the link, and check what else in \(directory) is not yours", path: path)
        } catch let error as Errno {
            throw SecureKeysError.io("cannot open the lock file", path: path, errno: error.rawValue)
        }
        // The lock file is never unlinked, not even at release: a process that opened it before the unlink
        // would lock the removed inode while the next one creates and locks a new file, and both would own
        // the directory.
        do {
            try checkLockFile(descriptor, path: path, directory: directory)
            try lock(descriptor, path: path, directory: directory, for: owner)
        } catch {
            try? descriptor.close()
            throw error
        }
        guard writable else { return StateDirectoryLock(directory: directory, descriptor: descriptor) }
        let text = "\(getpid())\n\(owner == .deviceAgent ? agentMark + "\n" : "")".utf8
        do {
            guard ftruncate(descriptor.rawValue, 0) == 0 else { throw Errno(rawValue: errno) }
            _ = try descriptor.writeAll(toAbsoluteOffset: 0, text)
        } catch {
            try? descriptor.close()  // drops the lock too
            throw SecureKeysError.io("cannot write the process id into", path: path, errno: (error as? Errno)?.rawValue ?? EIO)
        }
        return StateDirectoryLock(directory: directory, descriptor: descriptor)
    }

    /// Checks that the lock file is a regular file of this user's with no other name.
    ///
    /// A hard link to another file (made while the directory was open to others) would have its content replaced by a
    /// process id.
    private static func checkLockFile(_ descriptor: FileDescriptor, path: String, directory: String) throws {
        let info: stat
        do throws(Errno) { info = try descriptor.stat().rawValue } catch {
            throw SecureKeysError.io("cannot stat", path: path, errno: error.rawValue)
        }
        let problem: String? =
            if (info.st_mode & S_IFMT) != S_IFREG { "it is not a regular file" }
            else if info.st_uid != geteuid() { "it belongs to \(PrivateDirectory.user(info.st_uid)), not to you" }
            else if info.st_nlink != 1 { "it has \(info.st_nlink) names (a hard link to another file)" }
            else { nil }
        if let problem {
            throw SecureKeysError.insecureStateDirectory(
                "\(problem); the lock file is written, so it must be yours alone. Remove it (it holds nothing but a "
                    + "process id), and check what else in \(directory) is not yours", path: path)
        }
    }

    /// Waits out the moments a refusal would name no live holder, then locks or throws.
    ///
    /// The holder writes its id just after locking, and ``holder(of:)`` holds a shared lock for an instant:
    /// for up to 50 ms an empty file, or an id whose process is gone, is retried rather than reported.
    private static func lock(_ descriptor: FileDescriptor, path: String, directory: String, for requester: Owner) throws {
        let deadline = ContinuousClock.now + .milliseconds(50)
        // `flock`, which swift-system has no call for (its `lock` takes open-file-description record locks, which
        // do not conflict with `flock`'s).
        while flock(descriptor.rawValue, LOCK_EX | LOCK_NB) != 0 {
            let error = errno
            if error == EINTR { continue }
            guard error == EWOULDBLOCK else { throw SecureKeysError.io("cannot lock", path: path, errno: error) }
            if let (holder, owner) = readHolder(descriptor), isAlive(holder) {
                throw DeviceError.stateInUse(directory, holder: holder, byAgent: owner == .deviceAgent, requester: requester)
            }
            guard ContinuousClock.now < deadline else {
                throw DeviceError.stateInUse(directory, holder: nil, requester: requester)
            }
            usleep(5_000)
        }
    }

    /// Gives the directory up.
    ///
    /// The lock file stays, emptied, for the next owner. Idempotent; freeing the lock releases it too.
    public func release() {
        descriptor.withLock { descriptor in
            guard let held = descriptor else { return }
            descriptor = nil
            // Emptied while still held, so an id in the file is never one of an owner that let go cleanly.
            _ = ftruncate(held.rawValue, 0)
            flock(held.rawValue, LOCK_UN)
            try? held.close()
        }
    }

    /// Whether this lock still holds its directory (not released).
    var isHeld: Bool { descriptor.withLock { $0 != nil } }

    /// The process id written by whoever holds the lock of `directory` now, or `nil` when nobody holds it.
    ///
    /// Creates nothing and never takes the lock: it tries a shared lock for an instant, which fails only
    /// while an owner holds it, and then reads the id the owner wrote. `nil` too when the owner has not
    /// written its id within 50 ms of locking.
    ///
    /// - Parameter directory: the state directory.
    public static func holder(of directory: String) -> Int32? {
        holderAndOwner(of: directory)?.0
    }

    /// Whether a device agent holds `directory` now.
    ///
    /// Its socket may not be there yet, as it is made just after.
    package static func isHeldByAgent(_ directory: String) -> Bool {
        holderAndOwner(of: directory)?.1 == .deviceAgent
    }

    private static func holderAndOwner(of directory: String) -> (Int32, Owner)? {
        guard let descriptor = try? FileDescriptor.open(
            path(in: directory), .readOnly, options: [.closeOnExec, .noFollow, .nonBlocking])
        else { return nil }
        defer { try? descriptor.close() }
        guard (try? descriptor.stat())?.type == .regular else { return nil }
        // Raw `flock`: swift-system has no call for it.
        var result: Int32
        repeat { result = flock(descriptor.rawValue, LOCK_SH | LOCK_NB) } while result != 0 && errno == EINTR
        if result == 0 {
            flock(descriptor.rawValue, LOCK_UN)
            return nil
        }
        let deadline = ContinuousClock.now + .milliseconds(50)
        while true {
            if let holder = readHolder(descriptor) { return holder }
            guard ContinuousClock.now < deadline else { return nil }
            usleep(5_000)
        }
    }

    /// The decimal process id on the lock file's first line and the owner its second names, or `nil` when it
    /// holds no id.
    private static func readHolder(_ descriptor: FileDescriptor) -> (Int32, Owner)? {
        var bytes = [UInt8](repeating: 0, count: 64)
        let count = (try? bytes.withUnsafeMutableBytes { try descriptor.read(fromAbsoluteOffset: 0, into: $0) }) ?? 0
        guard count > 0 else { return nil }
        let lines = String(decoding: bytes[..<count], as: UTF8.self).split(separator: "\n")
        guard let first = lines.first, let id = Int32(first.trimmingCharacters(in: .whitespaces)), id > 0 else { return nil }
        return (id, lines.dropFirst().first == Substring(agentMark) ? .deviceAgent : .process)
    }

    /// Whether a process with id `id` exists.
    ///
    /// `EPERM` means it does, as another user's.
    private static func isAlive(_ id: Int32) -> Bool {
        kill(id, 0) == 0 || errno == EPERM
    }
}
