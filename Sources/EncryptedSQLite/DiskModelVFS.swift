internal import DiskModel
internal import CDiskVFS
internal import CSQLCipher
internal import SecureKeys
internal import StoreConcurrency
internal import Glibc

/// Connects SQLite to the simulated disk.
///
/// A `protected-store-disk` VFS (Sources/CDiskVFS) reports every write, truncation, sync and deletion of a
/// store's files to one ``SimulatedDisk``: one VFS is registered per disk, the first time a database opens on
/// that disk's file system, with the disk as its context, and unregistered when the disk's model stops. It asks
/// the ``DiskFaultPlan``s armed on the disk's file system before each open, write, sync and truncation (a
/// deletion goes through ``DiskIO``, which asks them too).
///
/// ``Database`` opens a file through this VFS only when its configuration's file system is a simulated disk's
/// that covers the path — in simulation. Every real app opens with SQLite's default VFS and never reaches this
/// code.
enum DiskModelVFS {
    /// The VFS name to open `path` with in `fileSystem`.
    ///
    /// It is the VFS of the file system's disk when the disk covers the path, else `nil` (the default VFS).
    static func name(forOpening path: String, in fileSystem: FileSystem) -> String? {
        guard let disk = fileSystem.disk(covering: path), prepared else { return nil }
        return registration(for: disk)
    }

    /// The disk a VFS reports to, held weakly: a connection may outlive the disk's model.
    private final class Context: Sendable {
        weak let disk: SimulatedDisk?
        init(_ disk: SimulatedDisk) { self.disk = disk }

        /// The disk `context` (a VFS's) reports to, if it is still there.
        static func disk(_ context: UnsafeMutableRawPointer?) -> SimulatedDisk? {
            guard let context else { return nil }
            return Unmanaged<Context>.fromOpaque(context).takeUnretainedValue().disk
        }
    }

    /// The names of the VFSes registered, by the disk they report to, and the next name's number.
    private static let registered = LockedState<(names: [ObjectIdentifier: String], next: Int)>(([:], 1))

    /// The name of the VFS that reports to `disk`, registering it the first time.
    private static func registration(for disk: SimulatedDisk) -> String? {
        let key = ObjectIdentifier(disk)
        let added = registered.withLock { registered -> (name: String, vfs: UnsafeMutablePointer<sqlite3_vfs>)? in
            guard registered.names[key] == nil else { return nil }
            let name = "\(PS_DISK_VFS_NAME)-\(registered.next)"
            // Retained for as long as the VFS's memory lives, which is for ever (ps_disk_vfs_remove).
            let context = Unmanaged.passRetained(Context(disk)).toOpaque()
            guard let vfs = ps_disk_vfs_add(name, context) else {
                Unmanaged<Context>.fromOpaque(context).release()
                return nil
            }
            registered.next += 1
            registered.names[key] = name
            return (name, vfs)
        }
        guard let added else { return registered.withLock { $0.names[key] } }
        let vfs = UncheckedVFS(pointer: added.vfs)
        disk.whenModellingStops {
            registered.withLock { _ = $0.names.removeValue(forKey: key) }
            ps_disk_vfs_remove(vfs.pointer)
        }
        return added.name
    }

    /// A registered VFS, carried to the action that unregisters it.
    private struct UncheckedVFS: @unchecked Sendable {
        // @unchecked Sendable: SQLite's VFS list is guarded by its own mutex; the pointer is only handed back to it.
        let pointer: UnsafeMutablePointer<sqlite3_vfs>
    }

    /// The callbacks set, once, the first time a covered file is opened.
    private static let prepared: Bool = {
        var callbacks = ps_disk_callbacks()
        callbacks.opened = { context, path, created in
            guard let path, let disk = Context.disk(context), disk.covers(String(cString: path)) else { return 0 }
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
        callbacks.deleted = { context, path, syncDirectory in
            guard let path, let disk = Context.disk(context) else { return 0 }
            let name = String(cString: path)
            guard disk.covers(name) else { return 0 }
            do {
                try DiskIO.unlink(name, in: .simulated(disk))
                if syncDirectory != 0 { try DiskIO.syncDirectory(SecureFile.folder(containing: name), in: .simulated(disk)) }
                return 1
            } catch {
                return -1
            }
        }
        callbacks.alive = { handle in
            SimulatedDisk.owner(of: Int(handle))?.isAlive(Int(handle)) == true ? 1 : 0
        }
        callbacks.planned = { context, call, path, count, partial in
            guard let path, let disk = Context.disk(context) else { return 0 }
            let kind: DiskFaultPlan.Call
            switch call {
            case PS_DISK_CALL_OPEN: kind = .open
            case PS_DISK_CALL_WRITE: kind = .write
            case PS_DISK_CALL_SYNC: kind = .sync
            case PS_DISK_CALL_TRUNCATE: kind = .truncate
            default: return 0
            }
            switch FileSystem.simulated(disk).faultAction(for: kind, path: String(cString: path), byteCount: Int(count)) {
            case nil:
                return 0
            case .fail(let code):
                return code.rawValue
            case .writePart(let bytes):
                partial?.pointee = Int32(bytes)
                return ENOSPC
            }
        }
        return ps_disk_vfs_prepare(&callbacks) == SQLITE_OK
    }()
}
