#ifndef PROTECTEDSTORE_DISK_VFS_H
#define PROTECTEDSTORE_DISK_VFS_H

#include <stdint.h>

/// The SQLite VFS that reports every change of a store's files to the simulated disk
/// (SecureKeys' SimulatedDisk) before making it. It wraps the default VFS: reads, locks and shared memory are
/// the default VFS's own. Registered once under this name, never as the default: a database uses it only when
/// it is opened with it (EncryptedSQLite does so for paths a simulated disk covers).
#define PS_DISK_VFS_NAME "protected-store-disk"

/// The calls a fault plan (SecureKeys' DiskFaultPlan) may fail, as `planned` names them.
#define PS_DISK_CALL_OPEN 0
#define PS_DISK_CALL_WRITE 1
#define PS_DISK_CALL_SYNC 2
#define PS_DISK_CALL_TRUNCATE 3

/// What the VFS reports. A handle is the model's name for an open file; a callback returning 0 means the
/// handle is dead (the power was cut since it was opened): the operation fails with SQLITE_IOERR.
typedef struct ps_disk_callbacks {
    /// A file was opened; `created` is 1 when the open made it. Returns a handle > 0, or 0 for a file the
    /// model does not cover (it is then passed through unrecorded).
    int64_t (*opened)(const char *path, int created);
    /// Before a write: the bytes it replaces (`previous`, up to the old end of file) and the old size.
    int (*wrote)(int64_t handle, int64_t offset, const void *bytes, int count,
                 const void *previous, int previousCount, int64_t sizeBefore);
    /// Before a truncation: the bytes it removes and the old size.
    int (*truncated)(int64_t handle, int64_t size, const void *removed, int removedCount, int64_t sizeBefore);
    /// An xSync; `directoryToo` is 1 when the default VFS would also sync the file's folder (a new journal
    /// or write-ahead log, on its first sync).
    int (*synced)(int64_t handle, int directoryToo);
    /// The file was closed.
    void (*closed)(int64_t handle);
    /// xDelete of a covered path: the model removes it (and syncs its folder when `syncDirectory`). Returns 0
    /// when the path is not covered (the default VFS deletes it), 1 when done, -1 on failure.
    int (*deleted)(const char *path, int syncDirectory);
    /// Whether the handle is still alive.
    int (*alive)(int64_t handle);
    /// Asked before an xOpen, xWrite, xSync or xTruncate of a named file (`call` is a PS_DISK_CALL_*; `count`
    /// the size of a write): 0 to do it, or the `errno` it fails with instead — ENOSPC becomes SQLITE_FULL for
    /// a write, anything else the call's SQLITE_IOERR_* (SQLITE_CANTOPEN for an open), as the unix VFS maps
    /// them. For a short write it also sets `*partial` to the bytes to write first (then SQLITE_FULL).
    int (*planned)(int call, const char *path, int count, int *partial);
} ps_disk_callbacks;

/// Registers the VFS (once; later calls only replace the callbacks). Returns an SQLite result code.
int ps_disk_vfs_register(const ps_disk_callbacks *callbacks);

#endif
