internal import DiskModel
internal import Glibc
internal import SecureKeys
internal import SystemPackage

/// The lock an attach holds while it creates, migrates and merges a store.
///
/// Only one attach at a time runs in a folder.
///
/// Two attaches of one store at once — an app and an extension, or a controller that went away still closing
/// while its successor launches — would otherwise race through the steps that assume they are alone: both
/// create a key (`already-exists`), one opens the store file while the other is still writing its first pages
/// (`store-damaged`), both apply the first migration (`migration-failed`). The lock is an `flock(2)` on the
/// store's folder itself, so no file is added beside the store; the kernel releases it however the process ends.
/// It is held only for the attach: connections opened after it share the store as SQLite allows (WAL).
enum StoreAttachLock {
    /// Runs `body` with the folder that holds `storePath` locked.
    ///
    /// It waits for an attach in another process or task to finish first. Call it on the store's own thread, as
    /// the wait blocks.
    ///
    /// - Throws: `StoreError.Code.ioError` when the folder cannot be opened or locked; what `body` throws.
    static func withLock<Result>(forStoreAt storePath: String, _ body: () throws -> Result) throws -> Result {
        let folder = SecureFile.folder(containing: storePath)
        // Through a link to the folder too: the lock only orders attaches; the checks of the files come after it.
        let descriptor: FileDescriptor
        do throws(Errno) { descriptor = try systemCall { try FileDescriptor.open(FilePath(folder), .readOnly, options: [.directory, .closeOnExec]) } } catch {
            throw StoreError(wrapping: SecureKeysError.io("cannot open the store's folder to lock it", path: folder, errno: error))
        }
        defer { try? descriptor.close() }
        // `flock` by hand: swift-system has no call for it (its `lock` takes open-file-description record locks,
        // which do not conflict with `flock`'s).
        while flock(descriptor.rawValue, LOCK_EX) != 0 {
            guard errno == EINTR else {
                throw StoreError(wrapping: SecureKeysError.io("cannot lock the store's folder", path: folder, errno: errno))
            }
        }
        return try body()
    }
}
