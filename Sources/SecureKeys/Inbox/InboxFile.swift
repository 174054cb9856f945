package import DiskModel
import Glibc
import SystemPackage

/// How the inbox and its damaged-bytes file are opened.
///
/// They are never followed through a link, and never block on what is not a regular file (a FIFO put at the
/// path would block an `open` or a `read` for ever). Only regular files are opened.
///
/// The one place that opens them, so the append, the merge, the tool's `expect inbox` and `status` agree on
/// what an inbox is (OpenSSH's `auth_openfile` is the model: `O_NONBLOCK`, then `fstat`, then refuse).
package enum InboxFile {
    /// Why a path cannot be used as an inbox file.
    package struct Unusable: Error, Sendable, CustomStringConvertible {
        /// The path.
        package let path: String
        /// What is wrong, in words (`a FIFO, not a regular file`, `a symbolic link`, `Permission denied`).
        package let reason: String
        /// The `errno`, when a system call failed.
        package let systemErrno: Int32?

        package var description: String { "\(path) is \(reason)" }
    }

    /// Opens `path` for reading and writing (`O_APPEND` when `appending`), creating it (0600) when `create`
    /// and missing.
    ///
    /// - Parameter fileSystem: the file system to open it in.
    /// - Returns: the open file and its size, or `nil` when it does not exist and `create` is false.
    /// - Throws: ``Unusable`` for a link, a directory, a FIFO or anything else that is not a regular file, or
    ///   a file that cannot be opened; `SecureKeysError.Code.ioError` when `fstat` fails.
    package static func openForUpdate(
        _ path: String, create: Bool, appending: Bool = false, in fileSystem: FileSystem
    ) throws -> (file: DiskIO.File, size: Int)? {
        if !create, !SecureFile.exists(path) { return nil }
        let flags = O_RDWR | O_NONBLOCK | (create ? O_CREAT : 0) | (appending ? O_APPEND : 0)
        let file: DiskIO.File
        do {
            file = try DiskIO.open(path, flags: flags, in: fileSystem)
        } catch let error as SecureKeysError {
            guard let code = error.systemErrno else { throw error }
            if code == ENOENT, !create { return nil }
            throw unusable(path, errno: code)
        }
        do {
            return (file, try regularFileSize(file.descriptor, path: path))
        } catch {
            file.close()
            throw error
        }
    }

    /// Opens `path` read-only.
    ///
    /// It is for a look that changes nothing, such as `expect inbox`, `status` or a count.
    ///
    /// - Returns: the descriptor (the caller closes it) and the file's size, or `nil` when it does not exist.
    /// - Throws: as ``openForUpdate(_:create:appending:)``.
    package static func openForReading(_ path: String) throws -> (descriptor: Int32, size: Int)? {
        let descriptor: FileDescriptor
        do throws(Errno) {
            descriptor = try systemCall { try FileDescriptor.open(DiskPath.forSystemCall(path), .readOnly, options: [.nonBlocking, .noFollow, .closeOnExec]) }
        } catch {
            if error == .noSuchFileOrDirectory { return nil }
            throw unusable(path, errno: error.rawValue)
        }
        do {
            return (descriptor.rawValue, try regularFileSize(descriptor.rawValue, path: path))
        } catch {
            try? descriptor.close()
            throw error
        }
    }

    /// The size of the open file, after checking (on the descriptor, so nothing can swap the file in
    /// between) that it is a regular file.
    private static func regularFileSize(_ descriptor: Int32, path: String) throws -> Int {
        let info: stat
        do throws(Errno) { info = try FileDescriptor(rawValue: descriptor).stat().rawValue } catch {
            throw SecureKeysError.io("cannot stat", path: path, errno: error)
        }
        let type = info.st_mode & S_IFMT
        guard type == S_IFREG else {
            throw Unusable(path: path, reason: "\(SecureFile.kindOfFile(type)), not a regular file", systemErrno: nil)
        }
        return Int(info.st_size)
    }

    private static func unusable(_ path: String, errno code: Int32) -> Unusable {
        let reason = switch code {
        case ELOOP: "a symbolic link (never followed)"
        case EISDIR: "a directory, not a regular file"
        case ENXIO: "a FIFO or socket, not a regular file"
        default: "not openable (\(Errno(rawValue: code).description))"
        }
        return Unusable(path: path, reason: reason, systemErrno: code)
    }
}
