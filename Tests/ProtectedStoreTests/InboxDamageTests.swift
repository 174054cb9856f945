import DiskModel
import EncryptedSQLite
import Foundation
import SecureKeys
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@_spi(Testing) @testable import ProtectedStore

extension InboxFixture {
    /// Replaces the inbox file's bytes (as damage, or an interrupted append, would leave them).
    func setInbox(_ bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: inbox.inboxPath))
    }

    /// Appends puts `key i = value i` for each key, returning each record's offset and length.
    func putRecords(_ keys: [String]) throws -> [(offset: Int, length: Int)] {
        var spans: [(Int, Int)] = []
        for key in keys {
            let start = inboxBytes.count
            try put(key, "value of \(key)")
            spans.append((start, inboxBytes.count - start))
        }
        return spans
    }

    /// The bytes of the damaged-bytes file, without its span headers.
    var damagedBytes: Int { (try? inbox.damagedByteCount()) ?? -1 }
}

/// Writes `value` as the u32 length field of the record at `offset`.
private func setLength(_ bytes: inout [UInt8], recordAt offset: Int, to value: UInt32) {
    withUnsafeBytes(of: value.littleEndian) { for (index, byte) in $0.enumerated() { bytes[offset + 4 + index] = byte } }
}

/// Finding 1 and 2 of issue 26 and LevelDB's `log_test` shapes: every damage shape drops at most the damaged
/// record, says so, and moves what it could not read aside instead of truncating it away.
@Suite("Inbox damage")
struct InboxDamageTests {
    @Test("an acknowledged append after a torn tail is merged: the append cut the torn tail off, into the damaged-bytes file")
    func acknowledgedAppendAfterTornTailSurvives() throws {
        let fixture = try InboxFixture()
        try fixture.put("first", "1")
        let torn = fixture.inboxBytes.count - 10
        try fixture.setInbox(Array(fixture.inboxBytes.prefix(torn)))
        try fixture.put("second", "2")
        // The append cut the torn record off before writing after it.
        #expect(try fixture.inbox.pendingCount() == 1)
        #expect(fixture.damagedBytes == torn)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["second"])
        #expect(try fixture.value("second") == "2")
        #expect(report.problems.isEmpty)
        #expect(fixture.inboxBytes.isEmpty)
    }

    @Test("a torn tail found by the merge is moved aside with its byte count, never silently dropped")
    func tornTailAtMergeIsMovedAside() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b"])
        let cut = fixture.inboxBytes.count - 10
        try fixture.setInbox(Array(fixture.inboxBytes.prefix(cut)))
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["a"])
        #expect(report.problems == [.tornTail(offset: spans[1].offset, length: spans[1].length - 10)])
        #expect(report.movedAside == spans[1].length - 10)
        #expect(fixture.damagedBytes == spans[1].length - 10)
        #expect(fixture.inboxBytes.isEmpty)
    }

    @Test("an append that fails part-way (a short write, then ENOSPC) leaves the inbox as it was and reports the error")
    func failedAppendIsCutBack() throws {
        let fixture = try InboxFixture()
        try fixture.put("kept", "1")
        let before = fixture.inboxBytes
        for fault in [
            FaultPoint.Plan(.inboxAppendWrite, .failAfterWriting(bytes: 40, .noSpace)),
            FaultPoint.Plan(.inboxAppendWrite, .failAfterWriting(bytes: 1, .fileTooLarge)),
            FaultPoint.Plan(.inboxAppendSync, .fail(.ioError)),
        ] {
            let error = #expect(throws: StoreError.self) {
                try FaultPoint.$plan.withValue(fault) { try fixture.inbox.append(.put(key: "failed", value: "x")) }
            }
            // No space and the file-size limit are a full disk; a failed fsync is an I/O error.
            if fault.point == .inboxAppendSync { #expect(error?.code == .ioError, "\(fault)") } else { #expect(error?.code == .diskFull, "\(fault)") }
            #expect(fixture.inboxBytes == before, "\(fault)")
        }
        try fixture.put("later", "2")
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["kept", "later"])
        #expect(report.problems.isEmpty)
        #expect(try fixture.value("failed") == nil)
    }

    @Test("BadLength: a first length of 4,194,352 loses only the first record, reported and moved aside")
    func implausibleFirstLength() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b", "c"])
        var bytes = fixture.inboxBytes
        setLength(&bytes, recordAt: 0, to: 4_194_352)
        try fixture.setInbox(bytes)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["b", "c"])
        #expect(report.problems.count == 1)
        guard case .damaged(0, spans[0].length, _)? = report.problems.first else {
            Issue.record("expected the first record as damaged bytes, got \(report.problems)")
            return
        }
        #expect(fixture.damagedBytes == spans[0].length)
        #expect(fixture.inboxBytes.isEmpty)
    }

    @Test("BadLength: a length that runs across the next intact record loses only the damaged record")
    func lengthAcrossTheNextRecord() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b", "c"])
        var bytes = fixture.inboxBytes
        setLength(&bytes, recordAt: 0, to: UInt32(spans[0].length - 24 + 53))
        try fixture.setInbox(bytes)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["b", "c"])
        #expect(report.problems.count == 1)
        guard case .damaged(0, spans[0].length, let reason)? = report.problems.first else {
            Issue.record("expected the first record as damaged bytes, got \(report.problems)")
            return
        }
        #expect(reason.contains("runs across the intact record at byte \(spans[1].offset)"))
    }

    @Test("BadLength: a shorter length in the middle loses only that record")
    func shorterLengthInTheMiddle() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b", "c"])
        var bytes = fixture.inboxBytes
        setLength(&bytes, recordAt: spans[1].offset, to: 50)
        try fixture.setInbox(bytes)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["a", "c"])
        guard case .damaged(spans[1].offset, spans[1].length, _)? = report.problems.first, report.problems.count == 1 else {
            Issue.record("expected the middle record as damaged bytes, got \(report.problems)")
            return
        }
    }

    @Test("BadLength on the last record: a length past the end is a torn tail, moved aside, and the others merge")
    func lastLengthPastTheEnd() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b"])
        var bytes = fixture.inboxBytes
        setLength(&bytes, recordAt: spans[1].offset, to: 4000)
        try fixture.setInbox(bytes)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["a"])
        #expect(report.problems == [.tornTail(offset: spans[1].offset, length: spans[1].length)])
        #expect(fixture.damagedBytes == spans[1].length)
    }

    @Test("a damaged magic loses only that record")
    func damagedMagic() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b", "c"])
        var bytes = fixture.inboxBytes
        bytes[spans[1].offset] = UInt8(ascii: "X")
        try fixture.setInbox(bytes)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["a", "c"])
        #expect(report.problems == [.damaged(offset: spans[1].offset, length: spans[1].length, reason: "not a record")])
    }

    @Test("ChecksumMismatch: a record whose sealed bytes were altered is quarantined, never dropped, and the rest merge")
    func alteredSealedBytesAreQuarantined() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b", "c"])
        var bytes = fixture.inboxBytes
        bytes[spans[1].offset + 20] ^= 0x01
        try fixture.setInbox(bytes)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["a", "c"])
        #expect(report.problems == [.checksumMismatch(offset: spans[1].offset, length: spans[1].length)])
        #expect(report.quarantined.count == 1)
        #expect(report.quarantined.first?.reason == "its checksum fails and it does not open with this store's inbox key (damaged)")
        let kept = try InboxLedger(database: fixture.database).sealed()
        #expect(kept.map(\.sealed) == [Array(bytes[spans[1].offset + 8..<spans[1].offset + spans[1].length - 16])])
        #expect(fixture.damagedBytes == 0)
    }

    @Test("ChecksumMismatch in the checksum itself: the seal still authenticates, so the record is applied")
    func damagedChecksumFieldStillApplies() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b", "c"])
        var bytes = fixture.inboxBytes
        bytes[spans[1].offset + spans[1].length - 1] ^= 0x80
        try fixture.setInbox(bytes)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["a", "b", "c"])
        #expect(report.problems == [.checksumMismatch(offset: spans[1].offset, length: spans[1].length)])
        #expect(report.quarantined.isEmpty)
    }

    @Test("two damaged records in a row are each opened on their own: one applied, one quarantined, none lost")
    func adjacentChecksumFailures() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b", "c", "d"])
        var bytes = fixture.inboxBytes
        bytes[spans[1].offset + spans[1].length - 1] ^= 0x80  // b's checksum
        bytes[spans[2].offset + 30] ^= 0x01  // c's sealed bytes
        try fixture.setInbox(bytes)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["a", "b", "d"])
        #expect(report.quarantined.count == 1)
        #expect(report.problems == [
            .checksumMismatch(offset: spans[1].offset, length: spans[1].length),
            .checksumMismatch(offset: spans[2].offset, length: spans[2].length),
        ])
    }

    @Test("TruncatedTrailingRecordIsIgnored after a damaged record: the damaged one is quarantined, the tail moved aside")
    func damagedRecordThenTornTail() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b", "c"])
        var bytes = fixture.inboxBytes
        bytes[spans[1].offset + 30] ^= 0x01
        try fixture.setInbox(Array(bytes.dropLast(5)))
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["a"])
        #expect(report.quarantined.count == 1)
        #expect(report.problems == [
            .checksumMismatch(offset: spans[1].offset, length: spans[1].length),
            .tornTail(offset: spans[2].offset, length: spans[2].length - 5),
        ])
        #expect(fixture.damagedBytes == spans[2].length - 5)
    }

    @Test("garbage between records is moved aside byte for byte; a merge repeated after a crash does not copy it twice")
    func garbageIsMovedAsideOnce() throws {
        let fixture = try InboxFixture()
        try fixture.put("first", "1")
        let garbage = Array("garbage, not a record".utf8)
        try fixture.setInbox(fixture.inboxBytes + garbage)
        try fixture.put("second", "2")
        var applied: [String] = []
        #expect(throws: SimulatedCrash(point: .inboxMergeCommitted)) {
            try FaultPoint.$plan.withValue(.init(.inboxMergeCommitted)) { _ = try fixture.merge(counting: &applied) }
        }
        let report = try fixture.merge(counting: &applied)
        #expect(try fixture.value("first") == "1" && fixture.value("second") == "2")
        #expect(report.alreadyApplied == 2)
        #expect(fixture.damagedBytes == garbage.count)
        let damaged = fileBytes(fixture.inbox.files.inboxDamaged)
        #expect(Array(damaged.suffix(garbage.count)) == garbage)
        #expect(damaged.count == 36 + garbage.count, "one span, copied once")
        let mode = try (FileManager.default.attributesOfItem(atPath: fixture.inbox.files.inboxDamaged)[.posixPermissions] as! NSNumber).intValue
        #expect(mode == 0o600)
        #expect(fixture.inboxBytes.isEmpty)
    }

    @Test("the planted merge-truncates-unread fault loses the intact records after a damaged one (what the simulator must find)")
    func plantedFaultLosesIntactRecords() throws {
        let fixture = try InboxFixture()
        let spans = try fixture.putRecords(["a", "b", "c"])
        var bytes = fixture.inboxBytes
        setLength(&bytes, recordAt: 0, to: 4_194_352)
        try fixture.setInbox(bytes)
        var planted = fixture.inbox
        planted.truncatesUnread = true
        let report = try planted.merge(into: fixture.database, publicKey: fixture.publicKey, privateKey: fixture.privateKey, handlers: .keyValue)
        #expect(report.merged.isEmpty)
        #expect(try fixture.value("b") == nil)
        #expect(fixture.inboxBytes.isEmpty)
        #expect(fixture.damagedBytes == 0)
        _ = spans
    }
}

/// Findings 12, 13 and 15 of issue 26: what is at the inbox path is checked before it is read or written.
@Suite("Inbox file type")
struct InboxFileTypeTests {
    @Test("a FIFO at the inbox path never blocks: counting, appending and merging say inbox-unusable", .timeLimit(.minutes(1)))
    func fifoNeverBlocks() throws {
        let fixture = try InboxFixture()
        #expect(mkfifo(fixture.inbox.inboxPath, 0o600) == 0)
        let count = #expect(throws: StoreError.self) { try fixture.inbox.pendingCount() }
        #expect(count?.code == .inboxUnusable)
        #expect(count?.message.contains("a FIFO") == true)
        let append = #expect(throws: StoreError.self) { try fixture.inbox.append(.put(key: "k", value: "v")) }
        #expect(append?.code == .inboxUnusable)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(report.merged.isEmpty)
        guard case .unusable(let reason)? = report.problems.first else { Issue.record("expected an unusable inbox"); return }
        #expect(reason.contains("FIFO"))
    }

    @Test("a symbolic link or a directory at the inbox path is reported by the merge and left as it is")
    func linkAndDirectoryAreReported() throws {
        for kind in ["link", "directory"] {
            let fixture = try InboxFixture()
            let target = fixture.directory.file("elsewhere")
            try Data("x".utf8).write(to: URL(fileURLWithPath: target))
            if kind == "link" {
                #expect(symlink(target, fixture.inbox.inboxPath) == 0)
            } else {
                #expect(mkdir(fixture.inbox.inboxPath, 0o700) == 0)
            }
            var applied: [String] = []
            let report = try fixture.merge(counting: &applied)
            guard case .unusable? = report.problems.first else { Issue.record("\(kind): expected an unusable inbox"); continue }
            #expect(SecureFile.exists(fixture.inbox.inboxPath), "\(kind) kept for inspection")
            #expect(fileBytes(target) == Array("x".utf8), "\(kind): the target is untouched")
            let error = #expect(throws: StoreError.self) { try fixture.inbox.pendingCount() }
            #expect(error?.code == .inboxUnusable, "\(kind)")
        }
    }

    @Test("an inbox of mode 0644 is counted by expect inbox and status as the merge reads it")
    func readableByOthersIsCountedAsMerged() throws {
        let fixture = try InboxFixture()
        try fixture.put("a", "1")
        #expect(chmod(fixture.inbox.inboxPath, 0o644) == 0)
        #expect(try fixture.inbox.pendingCount() == 1)
        var applied: [String] = []
        _ = try fixture.merge(counting: &applied)
        #expect(applied == ["a"])
    }

    @Test("an append that would pass the inbox's cap is refused with inbox-full and writes nothing")
    func capIsEnforced() throws {
        let fixture = try InboxFixture()
        try fixture.put("a", "1")
        let size = fixture.inboxBytes.count
        let capped = LockedInbox(files: fixture.inbox.files, maximumSize: size * 2)
        try capped.append(.put(key: "b", value: "2"))
        let error = #expect(throws: StoreError.self) { try capped.append(.put(key: "c", value: "3")) }
        #expect(error?.code == .inboxFull)
        #expect(fixture.inboxBytes.count == size * 2)
    }
}

@MainActor
@Suite("Inbox file type at attach", .timeLimit(.minutes(3)))
struct InboxAtAttachTests {
    @Test("a directory at the inbox path does not fail the attach: the store is ready and the merge reports the inbox")
    func directoryDoesNotBlockAttach() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try fixture.put("k", "v")
        await fixture.controller.waitUntilIdle()
        try await fixture.rebootDevice()
        #expect(mkdir(fixture.storePath + ".inbox", 0o700) == 0)
        var reports: [InboxMergeReport] = []
        fixture.controller.observe { event in
            if case .inboxMerged(let report) = event { reports.append(report) }
        }
        await fixture.launch()
        try await fixture.unlock()
        #expect(fixture.controller.phase == .ready)
        #expect(try await fixture.value("k") == "v")
        #expect(reports.flatMap(\.problems).contains { if case .unusable = $0 { true } else { false } })
    }
}

/// Finding 11 of issue 26: replay protection by sequence numbers (payload version 3).
@Suite("Inbox replay")
struct InboxReplayTests {
    @Test("an old sealed record appended again after later merges is quarantined as a replay: the value never rolls back")
    func replayIsQuarantined() throws {
        let fixture = try InboxFixture()
        try fixture.put("k", "old")
        let oldRecord = fixture.inboxBytes
        var applied: [String] = []
        _ = try fixture.merge(counting: &applied)
        try fixture.put("k", "new")
        _ = try fixture.merge(counting: &applied)
        #expect(try fixture.value("k") == "new")

        let handle = try #require(FileHandle(forWritingAtPath: fixture.inbox.inboxPath))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(oldRecord))
        try handle.close()
        let report = try fixture.merge(counting: &applied)
        #expect(try fixture.value("k") == "new")
        #expect(report.merged.isEmpty)
        #expect(report.quarantined.count == 1)
        #expect(report.quarantined.first?.reason.hasPrefix("replayed: its sequence number, 1, is not above") == true)

        // A retry keeps it in quarantine.
        let ledger = InboxLedger(database: fixture.database)
        let kept = try #require(try ledger.sealed().first)
        let opened = try LockedInbox.openRecord(kept.sealed, publicKey: fixture.publicKey, privateKey: fixture.privateKey)
        #expect(try LockedInbox.apply(opened, with: .keyValue, ledger: ledger) != nil)
        #expect(try fixture.value("k") == "new")
    }

    @Test("records carry increasing sequence numbers across merges, and the store remembers the highest merged")
    func sequencesIncreaseAcrossMerges() throws {
        let fixture = try InboxFixture()
        var applied: [String] = []
        try fixture.put("a", "1")
        try fixture.put("b", "2")
        _ = try fixture.merge(counting: &applied)
        let first = try InboxLedger(database: fixture.database).highestSequence()
        #expect(first > 1)
        try fixture.put("c", "3")
        let report = try fixture.merge(counting: &applied)
        #expect(report.merged.count == 1)
        #expect(try InboxLedger(database: fixture.database).highestSequence() > first)
        #expect(applied == ["a", "b", "c"])
    }

    @Test("whoever deletes the sequence file makes new records look like replays: kept in quarantine (a denial of service), never a rollback; the next merge heals the file")
    func lostSequenceFileIsADenialOfServiceOnly() throws {
        let fixture = try InboxFixture()
        var applied: [String] = []
        try fixture.put("k", "1")
        try fixture.put("k", "2")
        _ = try fixture.merge(counting: &applied)
        try FileManager.default.removeItem(atPath: fixture.inbox.files.inboxSequence)
        try fixture.put("k", "3")
        let report = try fixture.merge(counting: &applied)
        #expect(report.quarantined.count == 1)
        #expect(try fixture.value("k") == "2")
        // Healed: the next record is above the highest merged again.
        try fixture.put("k", "4")
        _ = try fixture.merge(counting: &applied)
        #expect(try fixture.value("k") == "4")
    }

    @Test("a damaged sequence file refuses appends with inbox-unusable rather than guess a lower base")
    func damagedSequenceFileRefusesAppends() throws {
        let fixture = try InboxFixture()
        var applied: [String] = []
        try fixture.put("k", "1")
        _ = try fixture.merge(counting: &applied)
        var bytes = fileBytes(fixture.inbox.files.inboxSequence)
        bytes[6] ^= 1
        try Data(bytes).write(to: URL(fileURLWithPath: fixture.inbox.files.inboxSequence))
        let error = #expect(throws: StoreError.self) { try fixture.inbox.append(.put(key: "k", value: "2")) }
        #expect(error?.code == .inboxUnusable)
        #expect(fixture.inboxBytes.isEmpty)
    }
}
