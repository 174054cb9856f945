#ifndef PROTECTEDSTORE_DISK_VFS_H
#define PROTECTEDSTORE_DISK_VFS_H

#include <stdint.h>

/// The SQLite VFS that reports every change of a store's files to a simulated disk (DiskModel's
/// SimulatedDisk) before making it. It wraps the default VFS: reads, locks and shared memory are the default
/// VFS's own. One is registered per simulated disk (ps_disk_vfs_add), under a name that starts with this one
/// and with the disk as its context, never as the default: a database uses it only when it is opened with it
/// (EncryptedSQLite does so for a database whose configuration's file system is that disk's).
#define PS_DISK_VFS_NAME "protected-store-disk"

/// The calls a fault plan (DiskModel's DiskFaultPlan) may fail, as `planned` names them.
#define PS_DISK_CALL_OPEN 0
#define PS_DISK_CALL_WRITE 1
#define PS_DISK_CALL_SYNC 2
#define PS_DISK_CALL_TRUNCATE 3

/// What the VFS reports. A handle is the model's name for an open file; a callback returning 0 means the
/// handle is dead (the power was cut since it was opened): the operation fails with SQLITE_IOERR. `context`
/// is the one the VFS was added with (ps_disk_vfs_add): the disk it reports to.
typedef struct ps_disk_callbacks {
    /// A file was opened; `created` is 1 when the open made it. Returns a handle > 0, or 0 for a file the
    /// model does not cover (it is then passed through unrecorded).
    int64_t (*opened)(void *context, const char *path, int created);
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
    int (*deleted)(void *context, const char *path, int syncDirectory);
    /// Whether the handle is still alive.
    int (*alive)(int64_t handle);
    /// Asked before an xOpen, xWrite, xSync or xTruncate of a named file (`call` is a PS_DISK_CALL_*; `count`
    /// the size of a write): 0 to do it, or the `errno` it fails with instead — ENOSPC becomes SQLITE_FULL for
    /// a write, anything else the call's SQLITE_IOERR_* (SQLITE_CANTOPEN for an open), as the unix VFS maps
    /// them. For a short write it also sets `*partial` to the bytes to write first (then SQLITE_FULL).
    int (*planned)(void *context, int call, const char *path, int count, int *partial);
} ps_disk_callbacks;

/// Sets the callbacks every VFS added later reports to (later calls only replace them). Returns an SQLite
/// result code.
int ps_disk_vfs_prepare(const ps_disk_callbacks *callbacks);

typedef struct sqlite3_vfs sqlite3_vfs;

/// Registers a VFS named `name` whose files report with `context`, after ps_disk_vfs_prepare. Returns it, or
/// NULL when it cannot be registered.
sqlite3_vfs *ps_disk_vfs_add(const char *name, void *context);

/// Unregisters a VFS ps_disk_vfs_add returned. Its memory stays, in a list of retired VFSes, as a connection
/// opened through it may still be open; each of its files then reports to a context whose disk is gone.
void ps_disk_vfs_remove(sqlite3_vfs *vfs);

#endif
