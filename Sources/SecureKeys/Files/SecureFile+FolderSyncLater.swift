import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension SecureFile {
    /// Replaces the file at `path` with `bytes` and leaves the folder unsynced.
    ///
    /// A temporary file is written and `fsync`ed, then renamed over it. The rename becomes durable with the
    /// folder's next sync.
    ///
    /// A crash before that sync leaves the previous file whole, or the new one whole, never a mix. Only for a
    /// file whose previous version serves as well after a crash as the new one (the store creation marker's
    /// second stage), in a folder that is synced soon after anyway; ``writeAtomically(_:to:replacing:)`` syncs
    /// the folder itself.
    ///
    /// - Throws: `SecureKeysError.Code.ioError` for any failure, after which the previous file (if any) is intact.
    package static func replaceLeavingFolderUnsynced(_ bytes: [UInt8], at path: String) throws {
        let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let file = try DiskIO.open(temporary, flags: O_WRONLY | O_CREAT | O_EXCL, mode: fileMode)
        var renamed = false
        defer {
            if !renamed { try? DiskIO.unlink(temporary) }
        }
        do {
            defer { file.close() }
            try file.write(bytes)
            try file.sync()
        }
        try DiskIO.rename(temporary, to: path)
        renamed = true
    }
}
