import Foundation

import StoreConcurrency
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A disk that forgets what was not synced: the model behind simulated power cuts.
///
/// While a `SimulatedDisk` covers a folder, every change the project makes to a file in it — through
/// ``DiskIO`` for key files, device state and the inbox, through the `protected-store-disk` SQLite VFS for
/// the store, its write-ahead log and journal — is recorded as *pending* until it is made durable the way a
/// POSIX file system promises, and in no other way:
///
/// - `fsync`/`fdatasync` of a file makes its data (writes, truncations) durable;
/// - `fsync` of a directory makes the entries created, renamed and removed in it durable.
///
/// The real files always hold everything written (as the page cache would), so reads need no model. A
/// ``powerCut(_:random:)`` rewrites the folder as a disk could have kept it: what was durable, plus — by the
/// mode — none, a prefix or a random subset of what was pending. Files come back as new inodes, so a
/// connection opened before the cut can never reach them (its handles are dead: every write fails).
///
/// `fsync` itself is recorded, not performed, while a model covers a file: a simulation pays for the model,
/// not for the disk. Outside simulation nothing is covered and ``DiskIO`` is the plain system call.
///
/// Not modelled: SQLite's shared-memory index (`-shm`, memory that a reboot discards: deleted at a cut); lock
/// files (`*.lock`, such as the state directory's `owner.lock`: an `flock` lives in the kernel, not on the
/// disk, and the file is never unlinked, so a cut leaves it as it is — recreating it would move a lock still
/// held onto a dead inode); sockets (a device agent's, left behind when it was killed: a meeting point, not
/// data). A cut falls between two calls, never inside one: between the commands of a scenario, or — planned
/// with a ``DiskFaultPlan`` — between two file-system calls of one operation.
package final class SimulatedDisk: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is inside `state`, a LockedState.

    /// What a power cut keeps of the writes that were not durable.
    package enum PowerCutMode: String, Sendable, CaseIterable {
        /// Every unsynced write and entry change is lost.
        case drop
        /// Each file keeps a random prefix of its unsynced writes (in 512-byte sectors), each folder a random
        /// prefix of its unsynced entry changes.
        case tornSequence = "torn-sequence"
        /// Each unsynced 512-byte sector is kept or lost at random, in any combination; entry changes as in
        /// `tornSequence` (a file system journals metadata in order).
        case tornOp = "torn-op"
    }

    /// A missing `fsync` planted on purpose, so a test can show the simulator finds it.
    package enum PlantedFault: String, Sendable, CaseIterable {
        /// An inbox append returns without syncing the inbox.
        case skipInboxSync = "missing-inbox-fsync"
        /// A new key file is linked into its folder without syncing the folder.
        case skipNewFileDirectorySync = "missing-directory-fsync"
    }

    /// Why a sync is asked for, so that a planted fault can skip exactly one kind.
    package enum SyncPurpose: Sendable {
        case data
        case inboxAppend
        case newFileEntry
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

    /// The folder this disk covers (absolute, standardized).
    package let root: String
    private let graveyard: String
    private let state: LockedState<Model>

    /// A model of the files under `root`, which exist already as they are and count as durable.
    ///
    /// Registers the disk: from now on every write under `root` through ``DiskIO`` or the SQLite VFS is
    /// recorded. Call ``stopModelling()`` when done.
    package init(root: String) {
        self.root = Self.normalize(root)
        graveyard = self.root + "/.disk-model"
        var model = Model()
        // Inodes an earlier model kept for a power cut that never came: a clean shutdown frees them. Best
        // effort (a read-only folder keeps them; they are skipped below either way).
        _ = try? Self.removeTree(graveyard)
        model.adopt(Self.listTree(self.root, skipping: graveyard))
        state = LockedState(model)
        Self.registry.withLock { $0.disks.append(self) }
    }

    /// Ends the model: writes under `root` are plain system calls again; handles opened under it are dead.
    package func stopModelling() {
        Self.registry.withLock { $0.disks.removeAll { $0 === self } }
        state.withLock { $0.handles.removeAll() }
        _ = try? Self.removeTree(graveyard)
    }

    /// The process writing through this disk was killed (an app crash, or the apps a reboot ends): every handle
    /// open now is dead from here on — no write, truncation, sync or lock through it reaches the files — as the
    /// kernel closes a killed process's files and releases its locks. What it wrote stays as it was, durable or
    /// pending; closing such a handle later (freeing what the dead process held) changes nothing on disk: SQLite
    /// cannot checkpoint or remove a log through it.
    package func killOpenHandles() {
        let handles = state.withLock { model -> [Int] in
            defer { model.handles.removeAll() }
            return Array(model.handles.keys)
        }
        Self.forget(handles: handles)
    }

    /// A planted missing `fsync` (for the simulator's self-test), or `nil`.
    package var plantedFault: PlantedFault? {
        get { state.withLock { $0.fault } }
        set { state.withLock { $0.fault = newValue } }
    }

    /// How many power cuts this disk has seen.
    package var powerCuts: Int { state.withLock { $0.epoch } }

    /// Unsynced data pieces and entry changes right now: what a cut could lose.
    package var unsyncedChanges: (pieces: Int, entryChanges: Int) {
        state.withLock { model in
            (model.files.values.reduce(0) { $0 + $1.pending.reduce(0) { $0 + $1.pieceCount } },
             model.pendingEntries.values.reduce(0) { $0 + $1.count })
        }
    }

    // MARK: The registry

    private struct Registry {
        var disks: [SimulatedDisk] = []
        var nextHandle = 1
        var handles: [Int: SimulatedDisk] = [:]
    }

    private static let registry = LockedState(Registry())

    /// The disk covering `path`, if any. Cheap when no disk is registered (every real app).
    package static func covering(_ path: String) -> SimulatedDisk? {
        registry.withLock { registry in
            guard !registry.disks.isEmpty else { return nil }
            let absolute = normalize(path)
            return registry.disks.first { absolute == $0.root || absolute.hasPrefix($0.root + "/") }
        }
    }

    /// The disk that issued `handle`, while the handle is alive.
    package static func owner(of handle: Int) -> SimulatedDisk? {
        registry.withLock { $0.handles[handle] }
    }

    private static func issueHandle(for disk: SimulatedDisk) -> Int {
        registry.withLock { registry in
            defer { registry.nextHandle += 1 }
            registry.handles[registry.nextHandle] = disk
            return registry.nextHandle
        }
    }

    private static func forget(handles: some Sequence<Int>) {
        registry.withLock { registry in for handle in handles { registry.handles[handle] = nil } }
    }

    // MARK: Recording (DiskIO and the SQLite VFS call these; `path` is under `root`)

    /// A file was opened for writing; returns the handle later records name.
    ///
    /// - Parameters:
    ///   - created: the open created the file (its entry is a pending change of its folder).
    package func opened(_ path: String, created: Bool) -> Int {
        let path = Self.normalize(path)
        let handle = Self.issueHandle(for: self)
        state.withLock { model in
            let file: Int
            if !created, case .file(let existing)? = model.current[path] {
                file = existing
            } else {
                file = model.newFile()
                model.change(in: Self.folder(of: path), [(path, .file(file))])
            }
            model.handles[handle] = file
        }
        return handle
    }

    /// The current name of the file a live handle writes.
    package func path(of handle: Int) -> String? {
        state.withLock { model in
            guard let file = model.handles[handle] else { return nil }
            return model.current.first { $0.value == .file(file) }?.key
        }
    }

    /// Whether a handle is still good: false after a power cut or once the model stopped.
    package func isAlive(_ handle: Int) -> Bool {
        state.withLock { $0.handles[handle] != nil }
    }

    /// Records a write of `bytes` at `offset` that replaced `previous` (the bytes that were there, up to the
    /// old end of file), the file having been `sizeBefore` bytes long. False for a dead handle.
    package func wrote(
        _ handle: Int, offset: Int, bytes: UnsafeRawBufferPointer, previous: UnsafeRawBufferPointer, sizeBefore: Int
    ) -> Bool {
        state.withLock { model in
            guard let file = model.handles[handle] else { return false }
            model.files[file, default: FileRecord()].pending.append(
                .write(offset: offset, bytes: Array(bytes), previous: Array(previous), sizeBefore: sizeBefore))
            model.counters.writes += 1
            return true
        }
    }

    /// Records a truncation to `size` that removed `removed` (the bytes past `size`). False for a dead handle.
    package func truncated(_ handle: Int, to size: Int, removed: UnsafeRawBufferPointer, sizeBefore: Int) -> Bool {
        state.withLock { model in
            guard let file = model.handles[handle] else { return false }
            model.files[file, default: FileRecord()].pending.append(
                .truncate(size: size, removed: Array(removed), sizeBefore: sizeBefore))
            return true
        }
    }

    /// Records an `fsync` of an open file: its data is durable. Returns false for a dead handle, and true
    /// without recording anything when `purpose` is the planted fault's.
    package func synced(_ handle: Int, purpose: SyncPurpose = .data) -> Bool {
        state.withLock { model in
            guard let file = model.handles[handle] else { return false }
            if purpose == .inboxAppend, model.fault == .skipInboxSync { return true }
            // The simulated device key is written in the clear (it stands for a secure element's key): the
            // model's copies of written bytes are zeroed, not only freed, once durable.
            if var record = model.files.removeValue(forKey: file) {
                for index in record.pending.indices { record.pending[index].wipe() }
                record.pending.removeAll()
                model.files[file] = record
            }
            model.counters.syncs += 1
            return true
        }
    }

    /// The handle is closed.
    package func closed(_ handle: Int) {
        state.withLock { _ = $0.handles.removeValue(forKey: handle) }
        Self.forget(handles: [handle])
    }

    /// Records an `fsync` of the folder at `path`: its entry changes are durable.
    package func syncedDirectory(_ path: String, purpose: SyncPurpose = .data) {
        let path = Self.normalize(path)
        state.withLock { model in
            if purpose == .newFileEntry, model.fault == .skipNewFileDirectorySync { return }
            model.makeEntriesDurable(in: path)
            model.counters.directorySyncs += 1
        }
        collectGarbage()
    }

    /// Records `rename(from, to)`; call it before the real rename (it may keep the replaced file's inode).
    package func willRename(_ from: String, to: String) throws {
        let (from, to) = (Self.normalize(from), Self.normalize(to))
        try state.withLock { model in
            let node = model.current[from]
            try preserve(to, in: &model)
            if Self.folder(of: from) == Self.folder(of: to) {
                model.change(in: Self.folder(of: to), [(to, node), (from, nil)])
            } else {
                model.change(in: Self.folder(of: to), [(to, node)])
                model.change(in: Self.folder(of: from), [(from, nil)])
            }
        }
    }

    /// Records `link(from, to)` (`to` is new).
    package func linked(_ from: String, to: String) {
        let (from, to) = (Self.normalize(from), Self.normalize(to))
        state.withLock { model in model.change(in: Self.folder(of: to), [(to, model.current[from])]) }
    }

    /// Records `unlink(path)` or `rmdir(path)`; call it before the real removal (it may keep the inode).
    package func willRemove(_ path: String) throws {
        let path = Self.normalize(path)
        try state.withLock { model in
            guard model.current[path] != nil else { return }
            try preserve(path, in: &model)
            model.change(in: Self.folder(of: path), [(path, nil)])
        }
    }

    /// Records `mkdir(path)`.
    package func madeDirectory(_ path: String) {
        let path = Self.normalize(path)
        state.withLock { model in model.change(in: Self.folder(of: path), [(path, .directory)]) }
    }

    /// Before the last current name of a file goes away while the durable folder still names it, keeps its
    /// inode reachable (a hard link in the model's own folder): a power cut may bring the name back.
    private func preserve(_ path: String, in model: inout Model) throws {
        guard case .file(let file)? = model.current[path],
              model.current.values.filter({ $0 == .file(file) }).count == 1,
              model.durable.values.contains(.file(file)) || model.isPendingAnywhere(file),
              model.files[file]?.graveyardPath == nil
        else { return }
        if !Self.exists(graveyard) { guard mkdir(graveyard, 0o700) == 0 || errno == EEXIST else { return } }
        let kept = graveyard + "/\(file)"
        guard link(path, kept) == 0 else {
            throw SecureKeysError.io("cannot keep the inode of", path: path, errno: errno)
        }
        model.files[file, default: FileRecord()].graveyardPath = kept
    }

    /// Forgets files no name refers to, in memory or on the durable disk.
    private func collectGarbage() {
        let dead: [String] = state.withLock { model in
            let named = Set(model.current.values).union(model.durable.values)
            var paths: [String] = []
            for (file, record) in model.files where !named.contains(.file(file)) && !model.isPendingAnywhere(file) {
                if let path = record.graveyardPath { paths.append(path) }
                model.files[file] = nil
            }
            return paths
        }
        for path in dead { unlink(path) }
    }

    // MARK: Power cut

    /// Cuts the power: the folder is rewritten as the disk kept it, by `mode`, and every handle dies.
    ///
    /// Call it with no write in flight: between commands, or between two calls of an operation (a
    /// ``DiskFaultPlan/Fault/powerCut(_:seed:)`` does so, and the plan then fails the operation's later calls).
    /// Afterwards the model starts again from the rewritten folder, everything durable.
    ///
    /// - Throws: ``SecureKeysError`` when the folder cannot be rewritten.
    @discardableResult
    package func powerCut(_ mode: PowerCutMode, random: inout some RandomNumberGenerator) throws -> PowerCutReport {
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
            var folder = Self.folder(of: path)
            while folder != root {
                guard names[folder] == .directory else { return false }
                folder = Self.folder(of: folder)
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
                throw SecureKeysError.io("the simulated disk lost track of a file named at", path: root, errno: ENOENT)
            }
            var bytes = try Self.readAll(location.path)
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
        try Self.removeTree(root, keepingRoot: true, keepingLockFiles: true)
        var written: [Int: String] = [:]
        for (path, node) in names.sorted(by: { $0.key < $1.key }) {
            switch node {
            case .directory:
                guard mkdir(path, 0o700) == 0 || (errno == EEXIST && Self.isDirectory(path)) else {
                    throw SecureKeysError.io("cannot recreate", path: path, errno: errno)
                }
            case .file(let file):
                if let first = written[file] {
                    guard link(first, path) == 0 else { throw SecureKeysError.io("cannot recreate", path: path, errno: errno) }
                } else {
                    var content = contents.removeValue(forKey: file)!  // the only reference: zeroed in place
                    defer { secureZero(&content.bytes) }
                    try Self.writeNewFile(path, content.bytes, mode: content.mode)
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

    // MARK: The model

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

        /// Takes existing paths as durable (`true`: a folder).
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

        /// Where the file's bytes are now: a current name, or the link that keeps it.
        func location(of file: Int) -> (path: String, mode: mode_t)? {
            let path = current.first { $0.value == .file(file) }?.key ?? files[file]?.graveyardPath
            guard let path else { return nil }
            var info = stat()
            guard lstat(path, &info) == 0 else { return nil }
            return (path, info.st_mode & 0o777)
        }
    }

    /// A change of a file's data not yet durable, with what it replaced so it can be undone.
    enum DataOperation {
        case write(offset: Int, bytes: [UInt8], previous: [UInt8], sizeBefore: Int)
        case truncate(size: Int, removed: [UInt8], sizeBefore: Int)

        static let sectorSize = 512

        /// Zeroes the bytes this operation holds (and leaves an empty operation).
        mutating func wipe() {
            switch self {
            case .write(_, var bytes, var previous, _):
                self = .truncate(size: 0, removed: [], sizeBefore: 0)  // now the arrays are this copy's alone
                secureZero(&bytes)
                secureZero(&previous)
            case .truncate(_, var removed, _):
                self = .truncate(size: 0, removed: [], sizeBefore: 0)
                secureZero(&removed)
            }
        }

        /// Restores the file as it was before this operation.
        func undo(on file: inout [UInt8]) {
            switch self {
            case .write(let offset, _, let previous, let sizeBefore):
                Self.put(previous, at: offset, into: &file)
                Self.resize(&file, to: sizeBefore)
            case .truncate(let size, let removed, let sizeBefore):
                Self.resize(&file, to: sizeBefore)
                Self.put(removed, at: size, into: &file)
            }
        }

        /// The operation as pieces a disk keeps or loses independently: sector-aligned parts of a write.
        var pieces: [DataOperation] {
            guard case .write(let offset, let bytes, _, _) = self else { return [self] }
            var pieces: [DataOperation] = []
            var start = offset
            while start < offset + bytes.count {
                let end = min(offset + bytes.count, (start / Self.sectorSize + 1) * Self.sectorSize)
                pieces.append(.write(offset: start, bytes: Array(bytes[(start - offset)..<(end - offset)]), previous: [], sizeBefore: 0))
                start = end
            }
            return pieces
        }

        var pieceCount: Int {
            guard case .write(let offset, let bytes, _, _) = self, !bytes.isEmpty else { return 1 }
            return (offset + bytes.count - 1) / Self.sectorSize - offset / Self.sectorSize + 1
        }

        func apply(to file: inout [UInt8]) {
            switch self {
            case .write(let offset, let bytes, _, _): Self.put(bytes, at: offset, into: &file)
            case .truncate(let size, _, _): Self.resize(&file, to: size)
            }
        }

        private static func put(_ bytes: [UInt8], at offset: Int, into file: inout [UInt8]) {
            if file.count < offset + bytes.count { file += [UInt8](repeating: 0, count: offset + bytes.count - file.count) }
            file.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
        }

        private static func resize(_ file: inout [UInt8], to size: Int) {
            if file.count > size { file.removeSubrange(size...) } else { file += [UInt8](repeating: 0, count: size - file.count) }
        }
    }

    // MARK: Paths and files

    /// An absolute path without `.`, `..` or doubled slashes (no symbolic links resolved, as SQLite does not).
    package static func normalize(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var parts: [Substring] = []
        for part in absolute.split(separator: "/", omittingEmptySubsequences: true) {
            switch part {
            case ".": continue
            case "..": _ = parts.popLast()
            default: parts.append(part)
            }
        }
        return "/" + parts.joined(separator: "/")
    }

    static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/"), slash != path.startIndex else { return "/" }
        return String(path[..<slash])
    }

    private static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    private static func isDirectory(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// Whether an entry is one the model leaves alone (see the type's notes): a lock file or a socket.
    private static func isLeftAlone(_ name: String, type: mode_t) -> Bool {
        (name.hasSuffix(".lock") && type == S_IFREG) || type == S_IFSOCK
    }

    /// Every path under `root` (not `root` itself), with whether it is a folder; `-shm` files, lock files and
    /// `skipping` left out.
    private static func listTree(_ root: String, skipping: String) -> [(String, Bool)] {
        var result: [(String, Bool)] = []
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return result }
        for name in names.sorted() {
            let path = root + "/" + name
            guard path != skipping, !name.hasSuffix("-shm") else { continue }
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            let type = info.st_mode & S_IFMT
            let isDirectory = type == S_IFDIR
            // Only files and folders hold data, and lock files hold none the model keeps.
            guard isDirectory || type == S_IFREG, !isLeftAlone(name, type: type) else { continue }
            result.append((path, isDirectory))
            if isDirectory { result += listTree(path, skipping: skipping) }
        }
        return result
    }

    /// Removes `path` and everything under it; with `keepingLockFiles`, but lock files, sockets and the
    /// folders that hold one.
    ///
    /// - Returns: whether something was kept.
    @discardableResult
    private static func removeTree(_ path: String, keepingRoot: Bool = false, keepingLockFiles: Bool = false) throws -> Bool {
        var info = stat()
        guard lstat(path, &info) == 0 else { return false }
        if (info.st_mode & S_IFMT) == S_IFDIR {
            var kept = false
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                if try removeTree(path + "/" + name, keepingLockFiles: keepingLockFiles) { kept = true }
            }
            if kept || keepingRoot { return kept }
            if rmdir(path) != 0 { throw SecureKeysError.io("cannot remove", path: path, errno: errno) }
        } else if keepingLockFiles && isLeftAlone(path, type: info.st_mode & S_IFMT) {
            return true
        } else if unlink(path) != 0 {
            throw SecureKeysError.io("cannot remove", path: path, errno: errno)
        }
        return false
    }

    private static func readAll(_ path: String) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw SecureKeysError.io("cannot open", path: path, errno: errno) }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw SecureKeysError.io("cannot stat", path: path, errno: errno) }
        return try SecureFile.readAll(from: descriptor, offset: 0, count: Int(info.st_size), path: path)
    }

    private static func writeNewFile(_ path: String, _ bytes: [UInt8], mode: mode_t) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else { throw SecureKeysError.io("cannot recreate", path: path, errno: errno) }
        defer { close(descriptor) }
        try SecureFile.writeAll(bytes, to: descriptor, path: path)
    }
}
