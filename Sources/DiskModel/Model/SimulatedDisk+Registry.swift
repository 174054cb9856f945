import StoreConcurrency

// The handles the disks issued, by number, shared by the whole process: the SQLite VFS names an open file by
// its handle alone.
extension SimulatedDisk {
    struct Registry {
        var nextHandle = 1
        var handles: [Int: SimulatedDisk] = [:]
    }

    static let registry = LockedState(Registry())

    /// The disk that issued `handle`, while the handle is alive.
    package static func owner(of handle: Int) -> SimulatedDisk? {
        registry.withLock { $0.handles[handle] }
    }

    static func issueHandle(for disk: SimulatedDisk) -> Int {
        registry.withLock { registry in
            defer { registry.nextHandle += 1 }
            registry.handles[registry.nextHandle] = disk
            return registry.nextHandle
        }
    }

    static func forget(handles: some Sequence<Int>) {
        registry.withLock { registry in for handle in handles { registry.handles[handle] = nil } }
    }
}
