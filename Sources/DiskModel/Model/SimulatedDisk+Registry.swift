import StoreConcurrency

// The registry of the disks that cover a folder and of the handles they issued, shared by the whole process.
extension SimulatedDisk {
    struct Registry {
        var disks: [SimulatedDisk] = []
        var nextHandle = 1
        var handles: [Int: SimulatedDisk] = [:]
    }

    static let registry = LockedState(Registry())

    /// The disk covering `path`, if any. Cheap when no disk is registered (every real app).
    package static func covering(_ path: String) -> SimulatedDisk? {
        registry.withLock { registry in
            guard !registry.disks.isEmpty else { return nil }
            let absolute = DiskPath.normalize(path)
            return registry.disks.first { absolute == $0.root || absolute.hasPrefix($0.root + "/") }
        }
    }

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
