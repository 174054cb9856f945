internal import DiskModel
internal import CDiskVFS
internal import CSQLCipher
internal import SecureKeys
internal import Glibc

/// Connects SQLite to the simulated disk.
///
/// The `protected-store-disk` VFS (Sources/CDiskVFS) reports every write, truncation, sync and deletion of a
/// store's files to the ``SimulatedDisk`` covering them. It asks the armed ``DiskFaultPlan`` (if any) before
/// each open, write, sync and truncation (a deletion goes through ``DiskIO``, which asks it too).
///
/// ``Database`` opens a file through this VFS only when a simulated disk covers its path — in simulation.
/// Every real app opens with SQLite's default VFS and never reaches this code.
enum DiskModelVFS {
    /// The VFS name to open `path` with.
    ///
    /// It is this VFS's when a simulated disk covers the path, else `nil` (the default VFS).
    static func name(forOpening path: String) -> String? {
        guard SimulatedDisk.covering(path) != nil else { return nil }
        return registered ? PS_DISK_VFS_NAME : nil
    }

    /// Registered once, the first time a covered file is opened.
    private static let registered: Bool = {
        var callbacks = ps_disk_callbacks()
        callbacks.opened = { path, created in
            guard let path, let disk = SimulatedDisk.covering(String(cString: path)) else { return 0 }
            return Int64(disk.opened(String(cString: path), created: created != 0))
        }
        callbacks.wrote = { handle, offset, bytes, count, previous, previousCount, sizeBefore in
            guard let disk = SimulatedDisk.owner(of: Int(handle)) else { return 0 }
            let new = UnsafeRawBufferPointer(start: bytes, count: Int(count))
            let old = UnsafeRawBufferPointer(start: previous, count: Int(previousCount))
            return disk.wrote(Int(handle), offset: Int(offset), bytes: new, previous: old, sizeBefore: Int(sizeBefore)) ? 1 : 0
        }
        callbacks.truncated = { handle, size, removed, removedCount, sizeBefore in
            guard let disk = SimulatedDisk.owner(of: Int(handle)) else { return 0 }
            let bytes = UnsafeRawBufferPointer(start: removed, count: Int(removedCount))
            return disk.truncated(Int(handle), to: Int(size), removed: bytes, sizeBefore: Int(sizeBefore)) ? 1 : 0
        }
        callbacks.synced = { handle, directoryToo in
            guard let disk = SimulatedDisk.owner(of: Int(handle)), let path = disk.path(of: Int(handle)),
                  disk.synced(Int(handle))
            else { return 0 }
            // The default VFS syncs the folder of a new journal or log on its first sync.
            if directoryToo != 0 { disk.syncedDirectory(SecureFile.folder(containing: path)) }
            return 1
        }
        callbacks.closed = { handle in
            SimulatedDisk.owner(of: Int(handle))?.closed(Int(handle))
        }
        callbacks.deleted = { path, syncDirectory in
            guard let path else { return 0 }
            let name = String(cString: path)
            guard SimulatedDisk.covering(name) != nil else { return 0 }
            do {
                try DiskIO.unlink(name)
                if syncDirectory != 0 { try DiskIO.syncDirectory(SecureFile.folder(containing: name)) }
                return 1
            } catch {
                return -1
            }
        }
        callbacks.alive = { handle in
            SimulatedDisk.owner(of: Int(handle))?.isAlive(Int(handle)) == true ? 1 : 0
        }
        callbacks.planned = { call, path, count, partial in
            guard let path else { return 0 }
            let kind: DiskFaultPlan.Call
            switch call {
            case PS_DISK_CALL_OPEN: kind = .open
            case PS_DISK_CALL_WRITE: kind = .write
            case PS_DISK_CALL_SYNC: kind = .sync
            case PS_DISK_CALL_TRUNCATE: kind = .truncate
            default: return 0
            }
            switch DiskFaultPlan.action(for: kind, path: String(cString: path), byteCount: Int(count)) {
            case nil:
                return 0
            case .fail(let code):
                return code.rawValue
            case .writePart(let bytes):
                partial?.pointee = Int32(bytes)
                return ENOSPC
            }
        }
        return ps_disk_vfs_register(&callbacks) == SQLITE_OK
    }()
}
