// The `protected-store-disk` VFS: see include/disk_vfs.h.
#define SQLITE_HAS_CODEC 1
#include <sqlcipher/sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/stat.h>
#include <pthread.h>
#include "disk_vfs.h"

typedef struct DiskFile {
    sqlite3_file base;        // must come first
    sqlite3_file *real;       // the default VFS's file, allocated right after this struct
    int64_t handle;           // 0: not covered, passed through
    const char *name;         // the path it was opened at (SQLite keeps it valid until xClose), or NULL
    int syncsDirectory;       // a new journal or log: its first sync also syncs its folder
    void *context;            // the VFS's pAppData: the disk it reports to
} DiskFile;

static sqlite3_vfs diskVFS;   // the template each ps_disk_vfs_add copies
static sqlite3_vfs *defaultVFS;
static ps_disk_callbacks callbacks;

static int isDead(DiskFile *file) {
    return file->handle != 0 && !callbacks.alive(file->handle);
}

static int diskClose(sqlite3_file *base) {
    DiskFile *file = (DiskFile *)base;
    int rc = file->real->pMethods ? file->real->pMethods->xClose(file->real) : SQLITE_OK;
    if (file->handle != 0) callbacks.closed(file->handle);
    return rc;
}

static int diskRead(sqlite3_file *base, void *buffer, int amount, sqlite3_int64 offset) {
    DiskFile *file = (DiskFile *)base;
    return file->real->pMethods->xRead(file->real, buffer, amount, offset);
}

static int currentSize(DiskFile *file, sqlite3_int64 *size) {
    return file->real->pMethods->xFileSize(file->real, size);
}

// The errno a fault plan fails the call with (0: none); for a short write, `*partial` bytes are written first.
static int plannedFault(DiskFile *file, int call, int count, int *partial) {
    if (partial != NULL) *partial = 0;
    if (file->handle == 0 || file->name == NULL || callbacks.planned == NULL) return 0;
    return callbacks.planned(file->context, call, file->name, count, partial);
}

static int recordedWrite(DiskFile *file, const void *buffer, int amount, sqlite3_int64 offset);

static int diskWrite(sqlite3_file *base, const void *buffer, int amount, sqlite3_int64 offset) {
    DiskFile *file = (DiskFile *)base;
    if (file->handle == 0) return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    int partial = 0;
    int fault = plannedFault(file, PS_DISK_CALL_WRITE, amount, &partial);
    if (fault != 0) {
        // A disk that fills during the write: part of it lands, then the unix VFS's answer to a short write.
        if (partial > 0 && partial < amount) {
            int rc = recordedWrite(file, buffer, partial, offset);
            if (rc != SQLITE_OK) return rc;
        }
        return fault == ENOSPC ? SQLITE_FULL : SQLITE_IOERR_WRITE;
    }
    return recordedWrite(file, buffer, amount, offset);
}

static int recordedWrite(DiskFile *file, const void *buffer, int amount, sqlite3_int64 offset) {
    sqlite3_int64 size = 0;
    int rc = currentSize(file, &size);
    if (rc != SQLITE_OK) return rc;
    int previousCount = 0;
    if (offset < size) previousCount = (int)((size - offset) < amount ? (size - offset) : amount);
    void *previous = previousCount > 0 ? malloc((size_t)previousCount) : NULL;
    if (previousCount > 0 && previous == NULL) return SQLITE_IOERR_NOMEM;
    if (previousCount > 0) {
        rc = file->real->pMethods->xRead(file->real, previous, previousCount, offset);
        if (rc != SQLITE_OK) { free(previous); return SQLITE_IOERR_WRITE; }
    }
    int alive = callbacks.wrote(file->handle, offset, buffer, amount, previous, previousCount, size);
    free(previous);
    if (!alive) return SQLITE_IOERR_WRITE;
    return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
}

static int diskTruncate(sqlite3_file *base, sqlite3_int64 newSize) {
    DiskFile *file = (DiskFile *)base;
    if (file->handle == 0) return file->real->pMethods->xTruncate(file->real, newSize);
    if (plannedFault(file, PS_DISK_CALL_TRUNCATE, 0, NULL) != 0) return SQLITE_IOERR_TRUNCATE;
    sqlite3_int64 size = 0;
    int rc = currentSize(file, &size);
    if (rc != SQLITE_OK) return rc;
    if (newSize > size) newSize = size;  // the unix VFS never extends here either
    int removedCount = (int)(size - newSize);
    void *removed = removedCount > 0 ? malloc((size_t)removedCount) : NULL;
    if (removedCount > 0 && removed == NULL) return SQLITE_IOERR_NOMEM;
    if (removedCount > 0) {
        rc = file->real->pMethods->xRead(file->real, removed, removedCount, newSize);
        if (rc != SQLITE_OK) { free(removed); return SQLITE_IOERR_TRUNCATE; }
    }
    int alive = callbacks.truncated(file->handle, newSize, removed, removedCount, size);
    free(removed);
    if (!alive) return SQLITE_IOERR_TRUNCATE;
    return file->real->pMethods->xTruncate(file->real, newSize);
}

static int diskSync(sqlite3_file *base, int flags) {
    DiskFile *file = (DiskFile *)base;
    if (file->handle == 0) return file->real->pMethods->xSync(file->real, flags);
    if (plannedFault(file, PS_DISK_CALL_SYNC, 0, NULL) != 0) return SQLITE_IOERR_FSYNC;
    // Recorded, not performed: the model decides what a power cut keeps.
    if (!callbacks.synced(file->handle, file->syncsDirectory)) return SQLITE_IOERR_FSYNC;
    file->syncsDirectory = 0;
    return SQLITE_OK;
}

static int diskFileSize(sqlite3_file *base, sqlite3_int64 *size) {
    return currentSize((DiskFile *)base, size);
}

static int diskLock(sqlite3_file *base, int level) {
    DiskFile *file = (DiskFile *)base;
    if (isDead(file)) return SQLITE_IOERR_LOCK;
    return file->real->pMethods->xLock(file->real, level);
}

static int diskUnlock(sqlite3_file *base, int level) {
    DiskFile *file = (DiskFile *)base;
    return file->real->pMethods->xUnlock(file->real, level);
}

static int diskCheckReservedLock(sqlite3_file *base, int *result) {
    DiskFile *file = (DiskFile *)base;
    if (isDead(file)) return SQLITE_IOERR_CHECKRESERVEDLOCK;
    return file->real->pMethods->xCheckReservedLock(file->real, result);
}

static int diskFileControl(sqlite3_file *base, int op, void *argument) {
    DiskFile *file = (DiskFile *)base;
    // Size hints and chunked growth make the default VFS extend the file with ftruncate/fallocate behind
    // xWrite's back: refused for a covered file, so every change reaches the model.
    if (file->handle != 0 && (op == SQLITE_FCNTL_SIZE_HINT || op == SQLITE_FCNTL_CHUNK_SIZE)) return SQLITE_NOTFOUND;
    if (op == SQLITE_FCNTL_VFSNAME) {
        *(char **)argument = sqlite3_mprintf("%s", PS_DISK_VFS_NAME);
        return SQLITE_OK;
    }
    return file->real->pMethods->xFileControl(file->real, op, argument);
}

static int diskSectorSize(sqlite3_file *base) {
    DiskFile *file = (DiskFile *)base;
    return file->real->pMethods->xSectorSize(file->real);
}

static int diskDeviceCharacteristics(sqlite3_file *base) {
    DiskFile *file = (DiskFile *)base;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

static int diskShmMap(sqlite3_file *base, int region, int size, int extend, void volatile **pointer) {
    DiskFile *file = (DiskFile *)base;
    if (isDead(file)) return SQLITE_IOERR_SHMMAP;
    return file->real->pMethods->xShmMap(file->real, region, size, extend, pointer);
}

static int diskShmLock(sqlite3_file *base, int offset, int count, int flags) {
    DiskFile *file = (DiskFile *)base;
    if (isDead(file) && (flags & SQLITE_SHM_LOCK)) return SQLITE_IOERR_SHMLOCK;
    return file->real->pMethods->xShmLock(file->real, offset, count, flags);
}

static void diskShmBarrier(sqlite3_file *base) {
    DiskFile *file = (DiskFile *)base;
    file->real->pMethods->xShmBarrier(file->real);
}

static int diskShmUnmap(sqlite3_file *base, int deleteFlag) {
    DiskFile *file = (DiskFile *)base;
    // Never delete the shared-memory file of a dead connection: a live one may use a file of that name now.
    return file->real->pMethods->xShmUnmap(file->real, isDead(file) ? 0 : deleteFlag);
}

static const sqlite3_io_methods diskMethods = {
    2, diskClose, diskRead, diskWrite, diskTruncate, diskSync, diskFileSize, diskLock, diskUnlock,
    diskCheckReservedLock, diskFileControl, diskSectorSize, diskDeviceCharacteristics,
    diskShmMap, diskShmLock, diskShmBarrier, diskShmUnmap,
};

static int diskOpen(sqlite3_vfs *vfs, const char *name, sqlite3_file *base, int flags, int *outFlags) {
    DiskFile *file = (DiskFile *)base;
    memset(file, 0, sizeof(DiskFile));
    file->real = (sqlite3_file *)(file + 1);
    file->context = vfs->pAppData;
    // Not xAccess: the unix VFS reports an empty file as missing.
    struct stat info;
    int existed = name == NULL || stat(name, &info) == 0;
    // Opens for writing only, as DiskIO.open: a fault plan fails writes, not reads.
    if (name != NULL && !(flags & SQLITE_OPEN_DELETEONCLOSE) && (flags & SQLITE_OPEN_READWRITE) && callbacks.planned != NULL
        && callbacks.planned(file->context, PS_DISK_CALL_OPEN, name, 0, NULL) != 0) {
        base->pMethods = NULL;
        return SQLITE_CANTOPEN;
    }
    int rc = defaultVFS->xOpen(defaultVFS, name, file->real, flags, outFlags);
    if (rc != SQLITE_OK) { file->real->pMethods = NULL; base->pMethods = NULL; return rc; }
    base->pMethods = &diskMethods;
    if (name != NULL && !(flags & SQLITE_OPEN_DELETEONCLOSE)) {
        int created = !existed;
        file->handle = callbacks.opened(file->context, name, created);
        file->name = name;
        // As the unix VFS: every handle that opens a journal or log with SQLITE_OPEN_CREATE syncs the folder on
        // its first sync, whether or not this open was the one that created the file.
        file->syncsDirectory = (flags & SQLITE_OPEN_CREATE)
            && (flags & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL | SQLITE_OPEN_MASTER_JOURNAL));
    }
    return SQLITE_OK;
}

static int diskDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    int done = callbacks.deleted(vfs->pAppData, name, syncDirectory);
    if (done == 1) return SQLITE_OK;
    if (done < 0) return SQLITE_IOERR_DELETE;
    return defaultVFS->xDelete(defaultVFS, name, syncDirectory);
}

static int diskAccess(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs;
    return defaultVFS->xAccess(defaultVFS, name, flags, result);
}

static int diskFullPathname(sqlite3_vfs *vfs, const char *name, int count, char *out) {
    (void)vfs;
    return defaultVFS->xFullPathname(defaultVFS, name, count, out);
}

static void *diskDlOpen(sqlite3_vfs *vfs, const char *name) { (void)vfs; return defaultVFS->xDlOpen(defaultVFS, name); }
static void diskDlError(sqlite3_vfs *vfs, int count, char *message) { (void)vfs; defaultVFS->xDlError(defaultVFS, count, message); }
static void (*diskDlSym(sqlite3_vfs *vfs, void *library, const char *symbol))(void) {
    (void)vfs;
    return defaultVFS->xDlSym(defaultVFS, library, symbol);
}
static void diskDlClose(sqlite3_vfs *vfs, void *library) { (void)vfs; defaultVFS->xDlClose(defaultVFS, library); }
static int diskRandomness(sqlite3_vfs *vfs, int count, char *out) { (void)vfs; return defaultVFS->xRandomness(defaultVFS, count, out); }
static int diskSleep(sqlite3_vfs *vfs, int microseconds) { (void)vfs; return defaultVFS->xSleep(defaultVFS, microseconds); }
static int diskCurrentTime(sqlite3_vfs *vfs, double *now) { (void)vfs; return defaultVFS->xCurrentTime(defaultVFS, now); }
static int diskGetLastError(sqlite3_vfs *vfs, int count, char *out) { (void)vfs; return defaultVFS->xGetLastError(defaultVFS, count, out); }
static int diskCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *now) {
    (void)vfs;
    return defaultVFS->xCurrentTimeInt64(defaultVFS, now);
}

int ps_disk_vfs_prepare(const ps_disk_callbacks *newCallbacks) {
    callbacks = *newCallbacks;
    if (defaultVFS != NULL) return SQLITE_OK;
    sqlite3_vfs *found = sqlite3_vfs_find(NULL);
    if (found == NULL) return SQLITE_ERROR;
    defaultVFS = found;
    memset(&diskVFS, 0, sizeof diskVFS);
    diskVFS.iVersion = 2;
    diskVFS.szOsFile = (int)sizeof(DiskFile) + found->szOsFile;
    diskVFS.mxPathname = found->mxPathname;
    diskVFS.zName = PS_DISK_VFS_NAME;
    diskVFS.xOpen = diskOpen;
    diskVFS.xDelete = diskDelete;
    diskVFS.xAccess = diskAccess;
    diskVFS.xFullPathname = diskFullPathname;
    diskVFS.xDlOpen = diskDlOpen;
    diskVFS.xDlError = diskDlError;
    diskVFS.xDlSym = diskDlSym;
    diskVFS.xDlClose = diskDlClose;
    diskVFS.xRandomness = diskRandomness;
    diskVFS.xSleep = diskSleep;
    diskVFS.xCurrentTime = diskCurrentTime;
    diskVFS.xGetLastError = diskGetLastError;
    diskVFS.xCurrentTimeInt64 = diskCurrentTimeInt64;
    return SQLITE_OK;
}

/// A VFS ps_disk_vfs_add made: SQLite's structure first, so a pointer to it is one to the whole.
typedef struct AddedVFS {
    sqlite3_vfs base;
    /// The next VFS in the list of those unregistered.
    struct AddedVFS *nextRetired;
} AddedVFS;

/// The VFSes ps_disk_vfs_remove unregistered, kept for the process's life and reachable from here.
static AddedVFS *retired = NULL;
static pthread_mutex_t retiredLock = PTHREAD_MUTEX_INITIALIZER;

sqlite3_vfs *ps_disk_vfs_add(const char *name, void *context) {
    if (defaultVFS == NULL) return NULL;
    AddedVFS *vfs = malloc(sizeof *vfs);
    char *copy = malloc(strlen(name) + 1);
    if (vfs == NULL || copy == NULL) { free(vfs); free(copy); return NULL; }
    strcpy(copy, name);
    vfs->base = diskVFS;
    vfs->base.zName = copy;
    vfs->base.pAppData = context;
    vfs->nextRetired = NULL;
    if (sqlite3_vfs_register(&vfs->base, 0) != SQLITE_OK) { free(copy); free(vfs); return NULL; }
    return &vfs->base;
}

void ps_disk_vfs_remove(sqlite3_vfs *vfs) {
    sqlite3_vfs_unregister(vfs);
    // Not freed: a connection opened through it may still be open, and SQLite calls it through its pointer. It
    // stays in the list of retired VFSes instead, so it is memory kept on purpose, not lost (a leak checker sees
    // it reachable).
    AddedVFS *added = (AddedVFS *)vfs;
    pthread_mutex_lock(&retiredLock);
    added->nextRetired = retired;
    retired = added;
    pthread_mutex_unlock(&retiredLock);
}
