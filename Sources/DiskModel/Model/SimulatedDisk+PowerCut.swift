#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

// The power cut: the folder rewritten as the disk kept it, by mode.
extension SimulatedDisk {
    /// What a power cut keeps of the writes that were not durable.
    package enum PowerCutMode: String, Sendable, CaseIterable {
        /// Every unsynced write and entry change is lost.
        case drop
        /// Each file keeps a random prefix of its unsynced writes (in 512-byte sectors), each folder a random
        /// prefix of its unsynced entry changes.
        case tornSequence = "torn-sequence"
        /// Each unsynced 512-byte sector is kept or lost at random, in any combination.
        ///
        /// Entry changes go as in `tornSequence` (a file system journals metadata in order).
        case tornOp = "torn-op"
    }

    /// What one power cut did.
    package struct PowerCutReport: Sendable, Equatable {
        /// The mode it ran in.
        package var mode: PowerCutMode
        /// Unsynced data pieces (512-byte sectors and truncations) pending at the cut.
        package var unsyncedPieces = 0
        /// Of those, the ones lost.
        package var droppedPieces = 0
        /// Unsynced folder entry changes (creations, renames, removals) pending at the cut.
        package var unsyncedEntryChanges = 0
        /// Of those, the ones lost.
        package var droppedEntryChanges = 0
        /// Files written back.
        package var files = 0
    }

    /// Cuts the power.
    ///
    /// The folder is rewritten as the disk kept it, by `mode`, and every handle dies.
    ///
    /// Call it with no write in flight: between commands, or between two calls of an operation (a
    /// ``DiskFaultPlan/Fault/powerCut(_:seed:)`` does so, and the plan then fails the operation's later calls).
    /// Afterwards the model starts again from the rewritten folder, everything durable.
    ///
    /// - Throws: ``DiskError/io(operation:path:errno:)`` when the folder cannot be rewritten.
    @discardableResult
    package func powerCut(_ mode: PowerCutMode, random: inout some RandomNumberGenerator) throws(DiskError) -> PowerCutReport {
        var report = PowerCutReport(mode: mode)
        let (snapshot, handles) = state.withLock { model -> (Model, [Int]) in
            let handles = Array(model.handles.keys)
            model.handles.removeAll()
            model.epoch += 1
            return (model, handles)
        }
        Self.forget(handles: handles)

        // The names the disk keeps: the durable ones, then what each folder's journal kept, in order.
        var names = snapshot.durable
        for (_, changes) in snapshot.pendingEntries.sorted(by: { $0.key < $1.key }) {
            report.unsyncedEntryChanges += changes.count
            let kept = mode == .drop ? 0 : Int.random(in: 0...changes.count, using: &random)
            report.droppedEntryChanges += changes.count - kept
            for change in changes.prefix(kept) {
                for (path, node) in change { names[path] = node }
            }
        }
        // A name survives only inside folders that survived.
        names = names.filter { path, _ in
            var folder = DiskPath.folder(containing: path)
            while folder != root {
                guard names[folder] == .directory else { return false }
                folder = DiskPath.folder(containing: folder)
            }
            return true
        }

        // The bytes the disk keeps for each file a surviving name refers to.
        var contents: [Int: (bytes: [UInt8], mode: mode_t)] = [:]
        // In path order, so that a seed makes the same choices in every process (a Set's order is not stable).
        var files: [Int] = []
        for case (_, .file(let file)) in names.sorted(by: { $0.key < $1.key }) where !files.contains(file) { files.append(file) }
        for file in files {
            guard let location = snapshot.location(of: file) else {
                throw DiskError.io(operation: "the simulated disk lost track of a file named at", path: root, errno: .noSuchFileOrDirectory)
            }
            var bytes = try FileTree.read(location.path)
            let pending = snapshot.files[file]?.pending ?? []
            for operation in pending.reversed() { operation.undo(on: &bytes) }
            let pieces = pending.flatMap(\.pieces)
            report.unsyncedPieces += pieces.count
            let keep: [Bool]
            switch mode {
            case .drop:
                keep = Array(repeating: false, count: pieces.count)
            case .tornSequence:
                let prefix = Int.random(in: 0...pieces.count, using: &random)
                keep = pieces.indices.map { $0 < prefix }
            case .tornOp:
                keep = pieces.indices.map { _ in Bool.random(using: &random) }
            }
            for (piece, kept) in zip(pieces, keep) {
                if kept { piece.apply(to: &bytes) } else { report.droppedPieces += 1 }
            }
            contents[file] = (bytes, location.mode)
        }

        // Write it back: everything under the root goes (the shared-memory index too), but lock files and the
        // folders that hold them, then the kept tree.
        try FileTree.remove(root, keepingRoot: true, keepingLockFiles: true)
        var written: [Int: String] = [:]
        for (path, node) in names.sorted(by: { $0.key < $1.key }) {
            switch node {
            case .directory:
                guard mkdir(path, 0o700) == 0 || (errno == EEXIST && FileTree.isDirectory(path)) else {
                    throw DiskError.io(operation: "cannot recreate", path: path, errno: Errno(rawValue: errno))
                }
            case .file(let file):
                if let first = written[file] {
                    guard link(first, path) == 0 else { throw DiskError.io(operation: "cannot recreate", path: path, errno: Errno(rawValue: errno)) }
                } else {
                    var content = contents.removeValue(forKey: file)!  // the only reference: zeroed in place
                    defer { secureZero(&content.bytes) }
                    try FileTree.writeNew(path, content.bytes, mode: content.mode)
                    written[file] = path
                    report.files += 1
                }
            }
        }
        state.withLock { model in
            let epoch = model.epoch
            let fault = model.fault
            let counters = model.counters
            model = Model()
            model.epoch = epoch
            model.fault = fault
            model.counters = counters
            model.adopt(names.map { ($0.key, $0.value == .directory) })
        }
        return report
    }
}

extension SimulatedDisk.Model {
    /// Where the file's bytes are now.
    ///
    /// That is a current name, or the link that keeps it.
    func location(of file: Int) -> (path: String, mode: mode_t)? {
        let path = current.first { $0.value == .file(file) }?.key ?? files[file]?.graveyardPath
        guard let path else { return nil }
        guard let info = try? Stat(path, followTargetSymlink: false) else { return nil }
        return (path, info.mode.rawValue & 0o777)
    }
}
