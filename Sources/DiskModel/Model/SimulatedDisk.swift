import StoreConcurrency
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// A disk that forgets what was not synced.
///
/// It is the model behind simulated power cuts.
///
/// While a `SimulatedDisk` covers a folder, every change the project makes to a file in it on the disk's file
/// system (``FileSystem/simulated(_:)``, which the configurations of a simulation carry) — through
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
/// not for the disk. Outside simulation the file system is ``FileSystem/real`` and ``DiskIO`` is the plain
/// system call.
///
/// Not modelled: SQLite's shared-memory index (`-shm`, memory that a reboot discards: deleted at a cut); lock
/// files (`*.lock`, such as the state directory's `owner.lock`: an `flock` lives in the kernel, not on the
/// disk, and the file is never unlinked, so a cut leaves it as it is — recreating it would move a lock still
/// held onto a dead inode); sockets (a device agent's, left behind when it was killed: a meeting point, not
/// data); symbolic links and FIFOs (the library never makes one: they are damage a simulation puts in place of a
/// file, durable as they are, so a cut leaves them for the attach to meet). A cut falls between two calls, never inside one: between the commands of a scenario, or — planned
/// with a ``DiskFaultPlan`` — between two file-system calls of one operation.
package final class SimulatedDisk: @unchecked Sendable {
    // @unchecked Sendable: every mutable field is inside `state`, a LockedState.

    /// Why a sync is asked for, so that a planted fault can skip exactly one kind.
    package enum SyncPurpose: Sendable {
        case data
        case inboxAppend
        case newFileEntry
    }

    /// The folder this disk covers (absolute, standardized).
    package let root: String
    let graveyard: String
    let state: LockedState<Model>
    /// The fault plans armed on this disk's file system (``FileSystem/simulated(_:)``).
    package let faultPlans = ArmedFaultPlans()
    /// What runs when the model ends (``whenModellingStops(_:)``), until it does.
    private let stopActions = LockedState<[@Sendable () -> Void]?>([])

    /// A model of the files under `root`, which exist already as they are and count as durable.
    ///
    /// From now on every write under `root` on its file system (``FileSystem/simulated(_:)``), through
    /// ``DiskIO`` or the SQLite VFS, is recorded. Call ``stopModelling()`` when done.
    package init(root: String) {
        self.root = DiskPath.normalize(root)
        graveyard = self.root + "/.disk-model"
        var model = Model()
        // Inodes an earlier model kept for a power cut that never came: a clean shutdown frees them. Best
        // effort (a read-only folder keeps them; they are skipped below either way).
        _ = try? FileTree.remove(graveyard)
        model.adopt(FileTree.list(self.root, skipping: graveyard))
        state = LockedState(model)
    }

    /// Ends the model.
    ///
    /// Handles opened under `root` are dead, and its SQLite VFS is unregistered.
    package func stopModelling() {
        state.withLock { $0.handles.removeAll() }
        _ = try? FileTree.remove(graveyard)
        runStopActions()
    }

    deinit { runStopActions() }

    /// Runs `action` when the model ends (``stopModelling()``, or the disk's release), or now if it has ended.
    ///
    /// The SQLite VFS that reports to this disk is unregistered this way.
    package func whenModellingStops(_ action: @escaping @Sendable () -> Void) {
        let ended = stopActions.withLock { actions -> Bool in
            guard actions != nil else { return true }
            actions?.append(action)
            return false
        }
        if ended { action() }
    }

    private func runStopActions() {
        let actions = stopActions.withLock { actions in
            defer { actions = nil }
            return actions ?? []
        }
        for action in actions { action() }
    }

    /// Whether this disk's folder holds `path`.
    package func covers(_ path: String) -> Bool {
        let absolute = DiskPath.normalize(path)
        return absolute == root || absolute.hasPrefix(root + "/")
    }

    /// Kills every handle open now, as when the process writing through this disk was killed.
    ///
    /// The kill is an app crash, or the apps a reboot ends. Every handle open now is dead from here on: no
    /// write, truncation, sync or lock through it reaches the files, as the kernel closes a killed process's
    /// files and releases its locks. What it wrote stays as it was, durable or pending. Closing such a handle
    /// later (freeing what the dead process held) changes nothing on disk, so SQLite cannot checkpoint or
    /// remove a log through it.
    package func killOpenHandles() {
        let handles = state.withLock { model -> [Int] in
            defer { model.handles.removeAll() }
            return Array(model.handles.keys)
        }
        Self.forget(handles: handles)
    }

    /// A planted bug (for the simulator's self-test), or `nil`.
    ///
    /// The disk acts on a missing `fsync` and ignores the other layers' bugs.
    package var plantedFault: PlantedFault? {
        get { state.withLock { $0.fault } }
        set { state.withLock { $0.fault = newValue } }
    }

    /// How many power cuts this disk has seen.
    package var powerCuts: Int { state.withLock { $0.epoch } }

    /// Unsynced data pieces and entry changes right now.
    ///
    /// This is what a cut could lose.
    package var unsyncedChanges: (pieces: Int, entryChanges: Int) {
        state.withLock { model in
            (model.files.values.reduce(0) { $0 + $1.pending.reduce(0) { $0 + $1.pieceCount } },
             model.pendingEntries.values.reduce(0) { $0 + $1.count })
        }
    }

    // MARK: Recording (DiskIO and the SQLite VFS call these; `path` is under `root`)

    /// Records that a file was opened for writing.
    ///
    /// It returns the handle later records name.
    ///
    /// - Parameters:
    ///   - created: the open created the file (its entry is a pending change of its folder).
    package func opened(_ path: String, created: Bool) -> Int {
        let path = DiskPath.normalize(path)
        let handle = Self.issueHandle(for: self)
        state.withLock { model in
            let file: Int
            if !created, case .file(let existing)? = model.current[path] {
                file = existing
            } else {
                file = model.newFile()
                model.change(in: DiskPath.folder(containing: path), [(path, .file(file))])
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

    /// Whether a handle is still good.
    ///
    /// It is false after a power cut or once the model stopped.
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

    /// Records an `fsync` of an open file, making its data durable.
    ///
    /// Returns false for a dead handle, and true without recording anything when `purpose` is the planted
    /// fault's.
    package func synced(_ handle: Int, purpose: SyncPurpose = .data) -> Bool {
        state.withLock { model in
            guard let file = model.handles[handle] else { return false }
            if purpose == .inboxAppend, model.fault == .missingInboxFsync { return true }
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

    /// Records an `fsync` of the folder at `path`, making its entry changes durable.
    package func syncedDirectory(_ path: String, purpose: SyncPurpose = .data) {
        let path = DiskPath.normalize(path)
        state.withLock { model in
            if purpose == .newFileEntry, model.fault == .missingDirectoryFsync { return }
            model.makeEntriesDurable(in: path)
            model.counters.directorySyncs += 1
        }
        collectGarbage()
    }

    /// Records `rename(from, to)`.
    ///
    /// Call it before the real rename, as it may keep the replaced file's inode.
    package func willRename(_ from: String, to: String) throws(DiskError) {
        let (from, to) = (DiskPath.normalize(from), DiskPath.normalize(to))
        let preserved: Result<Void, DiskError> = state.withLock { model in
            let node = model.current[from]
            do throws(DiskError) { try preserve(to, in: &model) } catch { return .failure(error) }
            if DiskPath.folder(containing: from) == DiskPath.folder(containing: to) {
                model.change(in: DiskPath.folder(containing: to), [(to, node), (from, nil)])
            } else {
                model.change(in: DiskPath.folder(containing: to), [(to, node)])
                model.change(in: DiskPath.folder(containing: from), [(from, nil)])
            }
            return .success(())
        }
        try preserved.get()
    }

    /// Records `link(from, to)` (`to` is new).
    package func linked(_ from: String, to: String) {
        let (from, to) = (DiskPath.normalize(from), DiskPath.normalize(to))
        state.withLock { model in model.change(in: DiskPath.folder(containing: to), [(to, model.current[from])]) }
    }

    /// Records `unlink(path)` or `rmdir(path)`.
    ///
    /// Call it before the real removal, as it may keep the inode.
    package func willRemove(_ path: String) throws(DiskError) {
        let path = DiskPath.normalize(path)
        let preserved: Result<Void, DiskError> = state.withLock { model in
            guard model.current[path] != nil else { return .success(()) }
            do throws(DiskError) { try preserve(path, in: &model) } catch { return .failure(error) }
            model.change(in: DiskPath.folder(containing: path), [(path, nil)])
            return .success(())
        }
        try preserved.get()
    }

    /// Records `mkdir(path)`.
    package func madeDirectory(_ path: String) {
        let path = DiskPath.normalize(path)
        state.withLock { model in model.change(in: DiskPath.folder(containing: path), [(path, .directory)]) }
    }

    /// Keeps a file's inode reachable before its last current name goes away.
    ///
    /// This applies while the durable folder still names the file. The inode is kept through a hard link in
    /// the model's own folder, as a power cut may bring the name back.
    private func preserve(_ path: String, in model: inout Model) throws(DiskError) {
        guard case .file(let file)? = model.current[path],
              model.current.values.filter({ $0 == .file(file) }).count == 1,
              model.durable.values.contains(.file(file)) || model.isPendingAnywhere(file),
              model.files[file]?.graveyardPath == nil
        else { return }
        if !FileTree.exists(graveyard) { guard mkdir(graveyard, 0o700) == 0 || errno == EEXIST else { return } }
        let kept = graveyard + "/\(file)"
        guard link(path, kept) == 0 else {
            throw .io(operation: "cannot keep the inode of", path: path, errno: Errno(rawValue: errno))
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
}
