import DiskModel
import TestSupport
import EncryptedSQLite
import Foundation
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// A store with its inbox, opened directly (no controller), to drive appends and merges step by step.
final class InboxFixture {
    let directory = TemporaryDirectory()
    let storeKey: SecureBytes
    var storePath: String { directory.file("app.sqlite") }
    var inbox: LockedInbox { LockedInbox(files: StoreFiles(database: storePath)) }
    let database: Database
    let publicKey: [UInt8]
    let privateKey: SecureBytes

    init() throws {
        storeKey = try SecureBytes.random(count: 32)
        database = try Database(path: directory.file("app.sqlite"), key: storeKey)
        try DatabaseMigrator.keyValue.migrate(database)
        (publicKey, privateKey) = try LockedInbox(files: StoreFiles(database: directory.file("app.sqlite"))).openKeyPair(storeKey: storeKey)
    }

    /// Merges with the key-value handlers, adding the key of every put the merge reports applied to `applied`.
    func merge(counting applied: inout [String]) throws -> InboxMergeReport {
        let report = try inbox.merge(into: database, publicKey: publicKey, privateKey: privateKey, handlers: .keyValue)
        applied += report.merged.compactMap { keys[$0] }
        return report
    }

    /// The key of each put appended through ``put(_:_:)``, by record id.
    var keys: [InboxEntry.ID: String] = [:]

    /// Appends a put.
    @discardableResult
    func put(_ key: String, _ value: String) throws -> InboxEntry.ID {
        let id = try inbox.append(.put(key: key, value: value))
        keys[id] = key
        return id
    }

    func value(_ key: String) throws -> String? {
        try database.scalar("SELECT value FROM entries WHERE key = ?", [.text(key)])?.string
    }

    var inboxBytes: [UInt8] { fileBytes(inbox.inboxPath) }
}

@Suite("Locked inbox")
struct LockedInboxTests {
    @Test("records appended while locked are merged in arrival order, then the inbox is empty")
    func appendAndMerge() throws {
        let fixture = try InboxFixture()
        try fixture.put("a", "1")
        try fixture.put("b", "2")
        try fixture.put("a", "3")
        try fixture.inbox.append(.delete(key: "b"))
        #expect(try fixture.inbox.pendingCount() == 4)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(report.merged.count == 4)
        #expect(applied == ["a", "b", "a"])
        #expect(try fixture.value("a") == "3")
        #expect(try fixture.value("b") == nil)
        #expect(try fixture.inbox.pendingCount() == 0)
        #expect(fixture.inboxBytes.isEmpty)
    }

    @Test("a batch is appended in order with unique ids and merges like single appends")
    func batchAppend() throws {
        let fixture = try InboxFixture()
        let ids = try fixture.inbox.append(contentsOf: (0..<50).map { .put(key: "k\($0)", value: "v\($0)") })
        for (index, id) in ids.enumerated() { fixture.keys[id] = "k\(index)" }
        #expect(Set(ids).count == 50)
        #expect(try fixture.inbox.pendingCount() == 50)
        var applied: [String] = []
        _ = try fixture.merge(counting: &applied)
        #expect(applied == (0..<50).map { "k\($0)" })
    }

    @Test("the inbox and its key file never contain the plaintext, and the inbox file is 0600")
    func noPlaintext() throws {
        let fixture = try InboxFixture()
        try fixture.inbox.append(.put(key: "secret-key-MARKER", value: "secret-value-MARKER"))
        for path in [fixture.inbox.inboxPath, fixture.inbox.keyPath] {
            let bytes = fileBytes(path)
            #expect(!bytes.isEmpty)
            #expect(!bytes.contains(Array("MARKER".utf8)), "\(path)")
            let mode = try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as! NSNumber).intValue
            #expect(mode == 0o600)
        }
    }

    @Test("a torn last record (a crash during the append) is ignored, never taken for data, and the rest merge")
    func tornLastRecord() throws {
        let fixture = try InboxFixture()
        try fixture.put("kept", "yes")
        #expect(throws: SimulatedCrash(point: .inboxAppendTorn)) {
            try FaultPoint.$plan.withValue(.init(.inboxAppendTorn)) { try fixture.inbox.append(.put(key: "torn", value: "no")) }
        }
        #expect(try fixture.inbox.pendingCount() == 1)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["kept"])
        #expect(report.problems.count == 1)
        guard case .tornTail = report.problems.first else { Issue.record("expected a torn tail"); return }
        #expect(try fixture.value("torn") == nil)
    }

    @Test("a crash between the commit and the truncation never applies a record twice")
    func crashBetweenCommitAndTruncate() throws {
        let fixture = try InboxFixture()
        try fixture.put("once", "1")
        try fixture.put("twice?", "2")
        var applied: [String] = []
        #expect(throws: SimulatedCrash(point: .inboxMergeCommitted)) {
            try FaultPoint.$plan.withValue(.init(.inboxMergeCommitted)) { _ = try fixture.merge(counting: &applied) }
        }
        #expect(try fixture.value("once") == "1" && fixture.value("twice?") == "2", "the merge committed")
        #expect(try fixture.inbox.pendingCount() == 2, "the inbox was not truncated")
        try fixture.put("later", "3")
        let report = try fixture.merge(counting: &applied)
        #expect(report.alreadyApplied == 2)
        #expect(report.merged.count == 1)
        #expect(applied == ["later"])
        #expect(try fixture.inbox.pendingCount() == 0)
    }

    @Test("a tampered record is reported and quarantined, and the records around it are merged")
    func tamperedRecord() throws {
        let fixture = try InboxFixture()
        try fixture.put("before", "1")
        let start = fixture.inboxBytes.count
        try fixture.put("tampered", "2")
        try fixture.put("after", "3")
        var bytes = fixture.inboxBytes
        bytes[start + 20] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: fixture.inbox.inboxPath))
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["before", "after"])
        guard case .checksumMismatch(start, _)? = report.problems.first, report.problems.count == 1 else {
            Issue.record("expected a checksum mismatch at \(start), got \(report.problems)")
            return
        }
        #expect(report.problems.first?.description.hasPrefix("record at byte \(start) (") == true)
        #expect(report.quarantined.count == 1, "kept, never dropped")
    }

    @Test("a record with a valid checksum that was not sealed to this inbox is not applied: it is kept in quarantine")
    func foreignRecord() throws {
        let fixture = try InboxFixture()
        let stranger = try SealedBox.makeKeyPair()
        let payload = try InboxEntry.payload(for: .put(key: "intruder", value: "x"), id: .random())
        let foreign = try InboxRecord.seal(payload, to: stranger.publicKey)
        try Data(foreign).write(to: URL(fileURLWithPath: fixture.inbox.inboxPath))
        try fixture.put("genuine", "y")
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["genuine"])
        #expect(report.quarantined.map(\.reason) == ["it does not open with this store's inbox key"])
        #expect(report.quarantined.first?.kind == nil)
        #expect(try fixture.value("intruder") == nil)
        #expect(try InboxLedger(database: fixture.database).quarantined().count == 1)
    }

    @Test("garbage between records is skipped up to the next record")
    func resynchronises() throws {
        let fixture = try InboxFixture()
        try fixture.put("first", "1")
        var bytes = fixture.inboxBytes + Array("garbage!".utf8)
        try Data(bytes).write(to: URL(fileURLWithPath: fixture.inbox.inboxPath))
        try fixture.put("second", "2")
        bytes = fixture.inboxBytes
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["first", "second"])
        #expect(report.problems.count == 1)
    }

    @Test("appending before the store ever attached fails with inbox-unavailable")
    func noInboxBeforeFirstAttach() throws {
        let directory = TemporaryDirectory()
        let error = #expect(throws: StoreError.self) {
            try LockedInbox(files: StoreFiles(database: directory.file("x.sqlite"))).append(.delete(key: "k"))
        }
        #expect(error?.code == .inboxUnavailable)
    }

    @Test("the inbox private key does not unwrap with another store's key")
    func inboxKeyBelongsToItsStore() throws {
        let fixture = try InboxFixture()
        let file = try InboxKeyFile.load(from: fixture.inbox.keyPath)
        #expect(throws: SecureKeysError.self) { _ = try file.unwrapPrivateKey(storeKey: try SecureBytes.random(count: 32)) }
        #expect(try file.unwrapPrivateKey(storeKey: fixture.storeKey).constantTimeEquals(fixture.privateKey))
    }
}

@MainActor
@Suite("Locked inbox through the data controller", .timeLimit(.minutes(3)))
struct InboxControllerTests {
    @Test("a write while locked is present after the unlock, merged by the deferred setup")
    func writeWhileLockedThenUnlock() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        var reports: [InboxMergeReport] = []
        fixture.controller.observe { event in
            if case .inboxMerged(let report) = event { reports.append(report) }
        }
        try fixture.controller.appendToInbox(.put(key: "location", value: "48.85,2.35"))
        #expect(try fixture.controller.inbox.pendingCount() == 1)
        try await fixture.unlock()
        #expect(reports.map(\.merged.count) == [1])
        #expect(try await fixture.value("location") == "48.85,2.35")
        #expect(try fixture.controller.inbox.pendingCount() == 0)
    }
}
