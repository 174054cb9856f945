package import DiskModel
public import EncryptedSQLite
internal import Dispatch
internal import Logging
internal import ProtectedData
public import SecureKeys
internal import Glibc

/// Merging an inbox into its store, which needs the store key.
extension LockedInbox {
    /// The inbox key pair, made (and its file written) the first time a store attaches.
    ///
    /// For the store's attach, and for tests and benchmarks that drive an inbox without a controller.
    ///
    /// - Parameters:
    ///   - storeKey: the store's key, which wraps the inbox private key.
    ///   - syncingFolder: whether a new inbox key file's folder is synced, so its name survives a crash from
    ///     now on. Without it (the store's first attach, when SQLite's first sync of the new log syncs the
    ///     folder next) the caller makes sure the folder is synced.
    /// - Returns: the public key and the private key (in guarded memory; wipe it when done).
    /// - Throws: a `SecureKeysError` when the inbox key file is damaged or cannot be written.
    @_spi(Testing)
    public func openKeyPair(storeKey: SecureBytes, syncingFolder: Bool = true) throws -> (publicKey: [UInt8], privateKey: SecureBytes) {
        if SecureFile.exists(keyPath) {
            let file = try InboxKeyFile.load(from: keyPath)
            return (file.publicKey, try file.unwrapPrivateKey(storeKey: storeKey, path: keyPath))
        }
        let (file, privateKey) = try InboxKeyFile.make(storeKey: storeKey)
        try SecureFile.writeAtomically(file.bytes, to: keyPath, replacing: false, syncingFolder: syncingFolder, in: fileSystem)
        return (file.publicKey, privateKey)
    }

    /// Applies every pending record to `database` in one transaction, in arrival order, and at most once.
    ///
    /// Each record's identifier is recorded in `inbox_applied`. A record that cannot be applied moves to the
    /// quarantine (the records are then applied again in a new transaction, each in a savepoint of its own).
    /// Bytes that are not a record (and a torn tail) are moved to the damaged-bytes file first. Then it
    /// truncates the inbox, only after the commit, and only when everything in it was merged, quarantined or
    /// moved aside. It then forgets the recorded identifiers, which no record in the file names any more.
    ///
    /// Records are read one window at a time (`pread`, through a read-ahead), never the whole file: what the
    /// merge holds of the inbox is about one window (4 MiB, or one record when it is larger) whatever the
    /// inbox's size, plus the store's page cache; a window's records are opened on all cores into one guarded
    /// buffer, applied in order, and the buffer wiped before the next window.
    ///
    /// - Parameters:
    ///   - database: the store, open.
    ///   - publicKey: the inbox public key.
    ///   - privateKey: the inbox private key.
    ///   - handlers: how each kind of record is applied.
    /// - Returns: what was merged, quarantined, skipped and found wrong. An inbox that cannot be used at all
    ///   (a link, a directory, a FIFO, unreadable) is reported in ``InboxMergeReport/problems`` and left as
    ///   it is: it never fails the merge, nor the store's attach.
    /// - Throws: a failure of the store itself (disk full, I/O, damage): nothing was applied and the inbox
    ///   is left as it was.
    @_spi(Testing)
    public func merge(
        into database: Database, publicKey: [UInt8], privateKey: SecureBytes, handlers: InboxHandlers
    ) throws -> InboxMergeReport {
        var report = InboxMergeReport()
        let logger = LogSubsystem.inbox.makeLogger()
        let file: DiskIO.File
        let source: InboxBytesInFile
        let readAhead: InboxReadAhead
        let pieces: [InboxRecord.Piece]
        do {
            guard let opened = try InboxFile.openForUpdate(inboxPath, create: false, in: fileSystem) else { return report }
            file = opened.file
            do {
                try lock(file.descriptor)
                source = InboxBytesInFile(descriptor: file.descriptor, path: inboxPath, count: try file.size())
                // The scan and the merge read the file front to back: a chunk at a time, not a call per record.
                readAhead = InboxReadAhead(source)
                pieces = try InboxRecord.layout(of: readAhead)
            } catch {
                file.close()
                throw error
            }
        } catch {
            // The inbox never keeps a store from attaching: it is reported, and left for inspection.
            // The problem's description says the inbox was left as it is; the reason must not say it again.
            let reason = (error as? InboxFile.Unusable)?.description ?? Self.storeError(error).message
            report.problems = [.unusable(reason)]
            logger.notice("inbox cannot be merged", metadata: ["store": "\(files.database)", "problem": "\(report.problems[0])"])
            return report
        }
        defer { file.close() }
        guard source.count > 0 else { return report }

        var records: [(offset: Int, sealed: Range<Int>, verified: Bool)] = []
        var spans: [InboxDamagedBytes.Span] = []
        var problems: [InboxRecord.Problem] = []
        for piece in pieces {
            switch piece {
            case .record(let offset, let sealedLength, let verified):
                // The planted bug reads no further than the first span it cannot read.
                if truncatesUnread && !spans.isEmpty { continue }
                records.append((offset, offset + InboxRecord.headerLength..<offset + InboxRecord.headerLength + sealedLength, verified))
                if !verified { problems.append(.checksumMismatch(offset: offset, length: piece.length)) }
            case .damaged(let offset, let length, let reason):
                spans.append(.init(offset: offset, length: length))
                problems.append(.damaged(offset: offset, length: length, reason: reason))
            case .tornTail(let offset, let length):
                spans.append(.init(offset: offset, length: length))
                problems.append(.tornTail(offset: offset, length: length))
            }
        }
        // Moved aside, and synced, before anything is applied: the inbox is truncated only once they are safe.
        var mayTruncate = true
        if !truncatesUnread {
            do {
                report.movedAside = try InboxDamagedBytes.append(spans, from: source, to: files.inboxDamaged, in: fileSystem)
            } catch {
                mayTruncate = false
                problems.append(.unusable("its damaged bytes cannot be moved to \(files.inboxDamaged) (\(Self.storeError(error).message))"))
            }
        }
        report.problems = problems

        let ledger = InboxLedger(database: database)
        var highestMerged: UInt64 = 0
        /// Applies every record in one transaction.
        ///
        /// With `isolated`, each record is applied in a savepoint of its own.
        func applyAll(isolated: Bool) throws {
            try database.transaction {
                try ledger.prepare()
                let generation = try ledger.nextGeneration()
                var highest = try ledger.highestSequence()
                try Self.openInWindows(records, from: readAhead, publicKey: publicKey, privateKey: privateKey) { opened in
                    guard try ledger.markHandled(opened.id, generation: generation) else {
                        report.alreadyApplied += 1
                        return
                    }
                    if case .entry(let entry, let sealed) = opened {
                        if let reason = InboxLedger.replayReason(entry, highest: highest) {
                            // An old sealed record appended again: kept, still sealed, never applied.
                            defer { entry.wipe() }
                            try ledger.markReplay(entry.id)
                            report.quarantined.append(
                                try ledger.quarantine(
                                    entry.id, kind: entry.kind, schemaVersion: entry.schemaVersion, sealed: try sealed.bytes(), reason: reason))
                            return
                        }
                        if let sequence = entry.sequence { highest = sequence }
                    }
                    if let failure = try Self.apply(opened, with: handlers, ledger: ledger, isolated: isolated, checkReplay: false) {
                        report.quarantined.append(failure)
                    } else {
                        report.merged.append(opened.id)
                    }
                }
                try ledger.setHighestSequence(highest)
                try ledger.forgetEarlierThan(generation)
                highestMerged = highest
                try FaultPoint.reach(.inboxMergeApplied, by: faultPlan ?? FaultPoint.plan)
            }
        }
        // Records almost always apply: try them all in one transaction first, without a savepoint, and only
        // when one of them fails roll it back and apply them again with a savepoint per record (a savepoint
        // per record costs a statement journal each). No savepoint stays open across the records: SQLite keeps
        // a statement journal (in memory) for as long as one is open, and it would grow with every record.
        do {
            try applyAll(isolated: false)
        } catch is RecordNeedsIsolation {
            let kept = (report.problems, report.movedAside)
            report = InboxMergeReport()
            (report.problems, report.movedAside) = kept
            try applyAll(isolated: true)
        }
        readAhead.release()
        try FaultPoint.reach(.inboxMergeCommitted, by: faultPlan ?? FaultPoint.plan)
        // Sequences keep increasing across merges: the base moves past every record this inbox held (and past
        // the highest merged, which heals a base that was lost or lowered) before the records go.
        if mayTruncate {
            do {
                let base = (try? InboxSequence.base(at: files.inboxSequence)) ?? 0
                let next = max(base + UInt64(source.count), highestMerged)
                if next != base || (try? InboxSequence.base(at: files.inboxSequence)) == nil {
                    try InboxSequence.write(next, to: files.inboxSequence, in: fileSystem)
                }
            } catch {
                mayTruncate = false
                report.problems.append(.unusable("its sequence file cannot be written (\(Self.storeError(error).message))"))
            }
        }
        if mayTruncate {
            try file.truncate(to: 0)
            try file.sync()
        }
        logger.debug(
            "inbox merged",
            metadata: [
                "store": "\(files.database)", "merged": "\(report.merged.count)",
                "quarantined": "\(report.quarantined.count)", "already-applied": "\(report.alreadyApplied)",
                "problems": "\(report.problems.count)", "moved-aside": "\(report.movedAside)",
            ])
        for problem in report.problems { logger.notice("inbox problem", metadata: ["store": "\(files.database)", "problem": "\(problem)"]) }
        for record in report.quarantined {
            logger.trace("record quarantined", metadata: ["kind": "\(record.kind ?? "unreadable")", "attempts": "\(record.attempts)"])
        }
        return report
    }

    /// How many sealed bytes and records a window of records holds at most.
    ///
    /// A window holds one record when that record is larger. This is what a merge keeps in memory at once.
    static let windowBytes = 4 << 20
    static let windowRecords = 256

    /// Reads `records` from `source` one window at a time, opens each window's records concurrently (the
    /// X25519 opens are most of a merge's time) into one guarded buffer for the window, then hands them to
    /// `body` in file order.
    ///
    /// What a window holds is released before the next is read: its sealed bytes once it is opened (a record
    /// that must be quarantined is read again from the file), its buffer, wiped, once `body` has applied them.
    static func openInWindows(
        _ records: [(offset: Int, sealed: Range<Int>, verified: Bool)], from source: InboxReadAhead,
        publicKey: [UInt8], privateKey: SecureBytes, _ body: (Opened) throws -> Void
    ) throws {
        let cores = max(1, min(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 8))
        var start = 0
        while start < records.count {
            var end = start
            var bytes = 0
            while end < records.count, end - start < windowRecords, end == start || bytes + records[end].sealed.count <= windowBytes {
                bytes += records[end].sealed.count
                end += 1
            }
            // One guarded allocation for the window's payloads, each record opened into its own part: a guarded
            // allocation per record (mmap, mprotect, mlock, and back) cost more than a third of a merge.
            let window = Array(records[start..<end])
            let buffer = try SecureBytes(count: window.reduce(0) { $0 + max(0, $1.sealed.count - SealedBox.overhead) })
            defer { buffer.wipe() }
            var opened = try openWindow(
                window, from: source, into: buffer, workers: min(cores, window.count), publicKey: publicKey, privateKey: privateKey)
            for index in opened.indices {
                let record = opened[index]
                opened[index] = nil
                try body(record!)
            }
            start = end
        }
    }

    /// Reads a window's records and opens them on `workers` threads, each into its own part of `buffer`.
    ///
    /// The sealed bytes read are released when this returns.
    private static func openWindow(
        _ window: [(offset: Int, sealed: Range<Int>, verified: Bool)], from source: InboxReadAhead, into buffer: SecureBytes,
        workers: Int, publicKey: [UInt8], privateKey: SecureBytes
    ) throws -> [Opened?] {
        let sealed = try window.map { try source.read($0.sealed) }
        var total = 0
        let parts = window.map { record in
            let length = max(0, record.sealed.count - SealedBox.overhead)
            defer { total += length }
            return total..<total + length
        }
        let file = source.file
        var opened = [Opened?](repeating: nil, count: window.count)
        // The key and the buffer are reached once, here, and read in place by every worker (each writes only
        // its records' parts of the buffer): a lock taken per record would let one worker open at a time.
        try privateKey.withUnsafeBytes { secret in
            try buffer.withUnsafeMutableBytes { plaintext in
                opened.withUnsafeMutableBufferPointer { slots in
                    nonisolated(unsafe) let slots = slots
                    nonisolated(unsafe) let plaintext = plaintext
                    nonisolated(unsafe) let secret = secret
                    DispatchQueue.concurrentPerform(iterations: workers) { worker in
                        for index in stride(from: worker, to: window.count, by: workers) {
                            slots[index] = openRecord(
                                sealed[index], at: window[index].sealed, of: file, checksumVerified: window[index].verified,
                                into: plaintext, part: parts[index], of: buffer, publicKey: publicKey, privateKey: secret)
                        }
                    }
                }
            }
        }
        return opened
    }

    /// A record failed while the batch was applied without savepoints of its own.
    struct RecordNeedsIsolation: Error {}

    /// A record's sealed bytes, in memory or where they lie in the inbox file.
    ///
    /// The file is locked by the merge. The bytes are read again only when the record is quarantined, so a
    /// merge does not keep them while it applies the record.
    enum SealedBytes {
        case inMemory([UInt8])
        case inFile(InboxBytesInFile, Range<Int>)

        /// The bytes.
        ///
        /// - Throws: `SecureKeysError.Code.ioError` when they cannot be read from the file.
        func bytes() throws -> [UInt8] {
            switch self {
            case .inMemory(let bytes): bytes
            case .inFile(let file, let range): try file.read(range)
            }
        }
    }

    /// A record as far as it could be opened.
    ///
    /// It is an entry, or the reason it cannot be read.
    enum Opened {
        case entry(InboxEntry, sealed: SealedBytes)
        case unreadable(InboxEntry.ID, sealed: [UInt8], reason: String)

        var id: InboxEntry.ID {
            switch self {
            case .entry(let entry, _): entry.id
            case .unreadable(let id, _, _): id
            }
        }
    }

    /// Opens a sealed record.
    ///
    /// One that does not open or decode is named by a checksum of its sealed bytes.
    ///
    /// - Parameter checksumVerified: `false` for a record whose frame checksum failed: applied only when its
    ///   seal (authenticated) still opens, which proves its sealed bytes intact.
    /// - Throws: `SecureKeysError` with `out-of-memory` when there is no guarded memory to open it into (the
    ///   record is not judged unreadable for that).
    static func openRecord(_ sealed: [UInt8], checksumVerified: Bool = true, publicKey: [UInt8], privateKey: SecureBytes) throws -> Opened {
        let payload = try SecureBytes(count: max(0, sealed.count - SealedBox.overhead))
        let opened = (try? privateKey.withUnsafeBytes { secret in
            try payload.withUnsafeMutableBytes { plaintext in
                sealed.withUnsafeBytes { sealedBytes in
                    openRecord(
                        sealedBytes, sealed: { .inMemory(sealed) }, checksumVerified: checksumVerified, into: plaintext,
                        part: 0..<plaintext.count, of: payload, shared: false, publicKey: publicKey, privateKey: secret)
                }
            }
        }) ?? unreadable(sealed, checksumVerified: checksumVerified)
        if case .unreadable = opened { payload.wipe() }
        return opened
    }

    /// Opens the sealed record found at `range` of `file` into `part` of a window's guarded `buffer`.
    static func openRecord(
        _ sealed: [UInt8], at range: Range<Int>, of file: InboxBytesInFile, checksumVerified: Bool,
        into plaintext: UnsafeMutableRawBufferPointer, part: Range<Int>, of buffer: SecureBytes, publicKey: [UInt8],
        privateKey: UnsafeRawBufferPointer
    ) -> Opened {
        sealed.withUnsafeBytes { sealedBytes in
            openRecord(
                sealedBytes, sealed: { .inFile(file, range) }, checksumVerified: checksumVerified, into: plaintext, part: part,
                of: buffer, shared: true, publicKey: publicKey, privateKey: privateKey)
        }
    }

    private static func openRecord(
        _ sealedBytes: UnsafeRawBufferPointer, sealed: () -> SealedBytes, checksumVerified: Bool,
        into plaintext: UnsafeMutableRawBufferPointer, part: Range<Int>, of buffer: SecureBytes, shared: Bool,
        publicKey: [UInt8], privateKey: UnsafeRawBufferPointer
    ) -> Opened {
        let output = UnsafeMutableRawBufferPointer(rebasing: plaintext[part])
        guard SealedBox.open(sealedBytes, into: output, publicKey: publicKey, privateKey: privateKey) else {
            return unreadable(Array(sealedBytes), checksumVerified: checksumVerified)
        }
        guard let entry = InboxEntry.decode(UnsafeRawBufferPointer(plaintext), in: buffer, at: part, shared: shared) else {
            secureZero(output)
            return .unreadable(checksumID(Array(sealedBytes)), sealed: Array(sealedBytes), reason: "it holds no valid payload")
        }
        return .entry(entry, sealed: sealed())
    }

    /// A record whose seal does not open.
    private static func unreadable(_ sealed: [UInt8], checksumVerified: Bool) -> Opened {
        .unreadable(
            checksumID(sealed), sealed: sealed,
            reason: checksumVerified
                ? "it does not open with this store's inbox key"
                : "its checksum fails and it does not open with this store's inbox key (damaged)")
    }

    /// What names a record that cannot be read.
    ///
    /// It is a checksum of its sealed bytes.
    private static func checksumID(_ sealed: [UInt8]) -> InboxEntry.ID {
        InboxEntry.ID(bytes: KeyDerivation.checksum(of: sealed[...], length: InboxEntry.idLength))
    }

    /// Applies an opened record in its own savepoint, or quarantines it.
    ///
    /// - Returns: `nil` when it was applied; its quarantine entry otherwise.
    /// - Throws: a failure of the store itself.
    ///
    /// - Parameters:
    ///   - isolated: whether the record gets a savepoint of its own. Without one, a failure of the record
    ///     throws ``RecordNeedsIsolation``: the caller rolls the batch back and applies it isolated.
    ///   - checkReplay: whether a record the merge found to be a replay stays in quarantine (a retry); the
    ///     merge checks sequences itself.
    static func apply(
        _ opened: Opened, with handlers: InboxHandlers, ledger: InboxLedger, isolated: Bool = true, checkReplay: Bool = true
    ) throws -> QuarantinedInboxRecord? {
        if checkReplay, case .entry(let entry, let sealed) = opened, try ledger.isReplay(entry.id) {
            defer { entry.wipe() }
            return try ledger.quarantine(
                entry.id, kind: entry.kind, schemaVersion: entry.schemaVersion, sealed: try sealed.bytes(),
                reason: "replayed: an old sealed record appended again; kept, never applied (discard it)")
        }
        switch opened {
        case .unreadable(let id, let sealed, let reason):
            return try ledger.quarantine(id, kind: nil, schemaVersion: nil, sealed: sealed, reason: reason)
        case .entry(let entry, let sealed):
            defer { entry.wipe() }
            guard isolated else {
                do {
                    try handlers.apply(entry, to: ledger.database)
                    return nil
                } catch {
                    if InboxLedger.failsTheWholeMerge(error) { throw error }
                    throw RecordNeedsIsolation()
                }
            }
            guard let failure = try ledger.applyInSavepoint(entry, handlers: handlers) else { return nil }
            return try ledger.quarantine(
                entry.id, kind: entry.kind, schemaVersion: entry.schemaVersion, sealed: try sealed.bytes(), reason: "\(failure)")
        }
    }
}

extension FaultPoint {
    /// The records were applied inside the merge's transaction, and the process dies before it commits
    /// (`AppSimulationStep.crashInsideMerge` plans it through ``StoreConfiguration/faultPlan``, as the merge
    /// runs on a store thread).
    package static let inboxMergeApplied = FaultPoint("inbox merge applied")
    /// The merge transaction committed, and the process dies before the inbox is truncated.
    package static let inboxMergeCommitted = FaultPoint("inbox merge committed")
}
