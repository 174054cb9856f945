// The pure model of a simulated disk: the names each folder holds now and durably, the changes of entries and
// data not yet durable, and the open handles.
extension SimulatedDisk {
    enum Node: Hashable {
        case file(Int)
        case directory
    }

    /// One change of a folder's entries, applied at once (a rename is two names changing together).
    typealias EntryChange = [(String, Node?)]

    struct FileRecord {
        var pending: [DataOperation] = []
        /// A hard link that keeps the inode while no current name refers to it.
        var graveyardPath: String?
    }

    struct Counters {
        var writes = 0
        var syncs = 0
        var directorySyncs = 0
    }

    struct Model {
        var fault: PlantedFault?
        var epoch = 0
        var nextFile = 1
        var counters = Counters()
        /// Names as the running system sees them, and as the disk has them durably.
        var current: [String: Node] = [:]
        var durable: [String: Node] = [:]
        /// Entry changes not yet made durable, by folder, in order.
        var pendingEntries: [String: [EntryChange]] = [:]
        var files: [Int: FileRecord] = [:]
        /// Open handles and the file each writes.
        var handles: [Int: Int] = [:]

        mutating func newFile() -> Int {
            defer { nextFile += 1 }
            files[nextFile] = FileRecord()
            return nextFile
        }

        /// Takes existing paths as durable.
        ///
        /// Each path's flag is `true` for a folder.
        mutating func adopt(_ paths: [(String, Bool)]) {
            for (path, isDirectory) in paths {
                let node: Node = isDirectory ? .directory : .file(newFile())
                current[path] = node
                durable[path] = node
            }
        }

        mutating func change(in folder: String, _ change: EntryChange) {
            for (path, node) in change { current[path] = node }
            pendingEntries[folder, default: []].append(change)
        }

        mutating func makeEntriesDurable(in folder: String) {
            for change in pendingEntries.removeValue(forKey: folder) ?? [] {
                for (path, node) in change { durable[path] = node }
            }
        }

        func isPendingAnywhere(_ file: Int) -> Bool {
            pendingEntries.values.contains { $0.contains { $0.contains { $0.1 == .file(file) } } }
        }
    }
}
