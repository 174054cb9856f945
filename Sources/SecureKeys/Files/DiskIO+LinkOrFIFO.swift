package import DiskModel
#if canImport(Glibc)
import Glibc
#endif

/// A symbolic link or a FIFO put in a file's place, and taken away: the damage both simulators make (a user's hand,
/// another program), never the library's own doing.
///
/// Through the seam: the moves and the folder syncs are the disk model's, and its fault plans see them. The link or
/// FIFO itself is made and removed with plain system calls, as the hand that puts it there would: it is not a file
/// the model keeps.
extension DiskIO {
    /// Puts a symbolic link to `aside`, or a FIFO, in place of the file at `path`, and syncs the folder.
    ///
    /// - Parameters:
    ///   - link: a symbolic link to `aside` when `true`, a FIFO otherwise.
    ///   - aside: where the file there goes, and what the link points to.
    ///   - movingFileAside: whether a file at `path` is first moved to `aside`; otherwise nothing may be there.
    ///   - fileSystem: the file system `path` is in.
    /// - Throws: `SecureKeysError.Code.ioError` when the file system refuses.
    package static func replaceWithLinkOrFIFO(
        _ path: String, link: Bool, aside: String, movingFileAside: Bool, in fileSystem: FileSystem
    ) throws {
        if movingFileAside { try rename(path, to: aside, in: fileSystem) }
        let made = link ? symlink(aside, path) : mkfifo(path, 0o600)
        guard made == 0 else { throw SecureKeysError.io("cannot create", path: path, errno: errno) }
        try syncDirectory(SecureFile.folder(containing: path), in: fileSystem)
    }

    /// Removes the link or FIFO ``replaceWithLinkOrFIFO(_:link:aside:movingFileAside:in:)`` put at `path` — never
    /// following it, never opening it — moves the file back from `aside` when it was moved there, and syncs the folder.
    ///
    /// - Throws: `SecureKeysError.Code.ioError` when the file system refuses.
    package static func restoreFromLinkOrFIFO(
        _ path: String, aside: String, fileWasMovedAside: Bool, in fileSystem: FileSystem
    ) throws {
        guard Glibc.unlink(path) == 0 || errno == ENOENT else {
            throw SecureKeysError.io("cannot remove", path: path, errno: errno)
        }
        if fileWasMovedAside { try rename(aside, to: path, in: fileSystem) }
        try syncDirectory(SecureFile.folder(containing: path), in: fileSystem)
    }
}
