import DiskModel
import Foundation
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// A change this test's "newer app" writes and the older one does not know.
struct NoteStarred: InboxChange, Equatable {
    static let kind = "note-starred"
    static let schemaVersion = 1
    var note: String
}

@Suite("Locked inbox: limits, quarantine, bounded bookkeeping")
struct InboxQuarantineTests {
    @Test("a 1 MiB value is sealed, acknowledged and merged whole")
    func oneMebibyteValueIsMerged() throws {
        let fixture = try InboxFixture()
        let value = String(repeating: "0123456789abcdef", count: (1 << 20) / 16)
        try fixture.put("big", value)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(report.merged.count == 1)
        #expect(report.problems.isEmpty && report.quarantined.isEmpty)
        #expect(try fixture.value("big") == value)
    }

    @Test("a value over the limit is refused at the append with inbox-record-too-large, and nothing is written")
    func oversizedValueIsRefused() throws {
        let fixture = try InboxFixture()
        try fixture.put("small", "1")
        let before = fixture.inboxBytes
        let error = #expect(throws: StoreError.self) {
            try fixture.inbox.append(contentsOf: [
                .put(key: "fits", value: "x"), .put(key: "huge", value: String(repeating: "x", count: InboxRecord.maximumPayloadLength)),
            ])
        }
        #expect(error?.code == .inboxRecordTooLarge)
        #expect(error?.message.contains("at most 4194304 bytes") == true)
        #expect(fixture.inboxBytes == before, "no record of the refused batch was written")
    }

    @Test("a record of an unknown kind between two good ones: both good ones merge, it is quarantined, still sealed")
    func unknownKindIsQuarantined() throws {
        let fixture = try InboxFixture()
        try fixture.put("first", "1")
        let starred = try fixture.inbox.append(NoteStarred(note: "groceries"))
        try fixture.put("second", "2")
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["first", "second"])
        #expect(report.quarantined.map(\.id) == [starred])
        #expect(report.quarantined.first?.kind == "note-starred")
        #expect(report.quarantined.first?.reason.hasPrefix("inbox-unknown-kind:") == true)
        #expect(fixture.inboxBytes.isEmpty, "the inbox is emptied: the record now lives in the store's quarantine")
        let sealed = try #require(try InboxLedger(database: fixture.database).sealed().first?.sealed)
        #expect(!sealed.contains(Array("groceries".utf8)), "kept sealed")
    }

    @Test("a record whose handler fails (a constraint) is rolled back alone; the records around it apply")
    func failingHandlerRollsBackOnlyItsRecord() throws {
        let fixture = try InboxFixture()
        try fixture.database.execute("CREATE TABLE starred(note TEXT NOT NULL UNIQUE)")
        let handlers = InboxHandlers.keyValue.handling(NoteStarred.self) { database, change in
            try database.execute("INSERT INTO starred(note) VALUES (?)", [.text(change.note)])
            try database.execute("INSERT INTO starred(note) VALUES (?)", [.text(change.note)])  // fails: unique
        }
        try fixture.put("before", "1")
        try fixture.inbox.append(NoteStarred(note: "twice"))
        try fixture.put("after", "2")
        let report = try fixture.inbox.merge(
            into: fixture.database, publicKey: fixture.publicKey, privateKey: fixture.privateKey, handlers: handlers)
        #expect(report.merged.count == 2)
        #expect(report.quarantined.first?.reason.hasPrefix("constraint:") == true)
        #expect(try fixture.database.scalar("SELECT count(*) FROM starred")?.int64 == 0, "its first insert was rolled back too")
        #expect(try fixture.value("before") == "1" && fixture.value("after") == "2")
    }

    @Test("a failure of the store itself fails the whole merge and leaves the inbox file as it was")
    func storeFailureLeavesInboxUntouched() throws {
        let fixture = try InboxFixture()
        let directory = TemporaryDirectory()
        let missing = {
            var configuration = Database.Configuration()
            configuration.createIfMissing = false
            return configuration
        }()
        let handlers = InboxHandlers().handlingKeyValue { _, _ in
            // Stands for a write the file system refused: SQLite's "unable to open" is store-unavailable.
            _ = try Database(path: directory.file("missing.sqlite"), key: try SecureBytes.random(count: 32), configuration: missing)
        }
        try InboxLedger(database: fixture.database).prepare()
        try fixture.put("a", "1")
        try fixture.put("b", "2")
        let before = fixture.inboxBytes
        #expect(throws: StoreError.self) {
            try fixture.inbox.merge(
                into: fixture.database, publicKey: fixture.publicKey, privateKey: fixture.privateKey, handlers: handlers)
        }
        #expect(fixture.inboxBytes == before)
        #expect(try InboxLedger(database: fixture.database).quarantined().isEmpty)
        var applied: [String] = []
        #expect(try fixture.merge(counting: &applied).merged.count == 2, "a later merge applies them")
    }

    @Test("a store whose inbox_applied predates generations (an earlier version's) still merges, and a replayed id stays handled")
    func storeFromBeforeGenerations() throws {
        let fixture = try InboxFixture()
        let replayed = try fixture.put("replayed", "old")
        try fixture.database.execute("CREATE TABLE inbox_applied(id BLOB PRIMARY KEY NOT NULL)")
        try fixture.database.execute("INSERT INTO inbox_applied(id) VALUES (?)", [.blob(replayed.bytes)])
        try fixture.put("fresh", "new")
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(report.alreadyApplied == 1)
        #expect(applied == ["fresh"])
        #expect(try fixture.value("replayed") == nil, "an id an earlier version recorded is never applied again")
    }

    @Test("the ids kept against a crash's replay are bounded: only the last merge's, also after a crash and its replay")
    func handledIdsAreBounded() throws {
        let fixture = try InboxFixture()
        let ledger = InboxLedger(database: fixture.database)
        var applied: [String] = []
        for batch in 0..<5 {
            try fixture.inbox.append(contentsOf: (0..<400).map { .put(key: "k\(batch)-\($0)", value: "v") })
            _ = try fixture.merge(counting: &applied)
            #expect(try ledger.handledCount() == 400, "after 2,000 merged records, only the last merge's 400 ids")
        }
        try fixture.inbox.append(contentsOf: (0..<300).map { .put(key: "c\($0)", value: "v") })
        #expect(throws: SimulatedCrash(point: .inboxMergeCommitted)) {
            try FaultPoint.$plan.withValue(.init(.inboxMergeCommitted)) { _ = try fixture.merge(counting: &applied) }
        }
        #expect(try ledger.handledCount() == 300)
        let replay = try fixture.merge(counting: &applied)
        #expect(replay.alreadyApplied == 300 && replay.merged.isEmpty)
        #expect(try ledger.handledCount() == 300)
        try fixture.put("next", "v")
        _ = try fixture.merge(counting: &applied)
        #expect(try ledger.handledCount() == 1)
        #expect(try fixture.database.scalar("SELECT count(*) FROM entries")?.int64 == 2_301)
    }
}

@MainActor
@Suite("Locked inbox through the controller: quarantine and merging while attached", .timeLimit(.minutes(3)))
struct InboxQuarantineControllerTests {
    /// What an app version that knows `NoteStarred` applies.
    static let updatedHandlers = InboxHandlers.keyValue.handling(NoteStarred.self) { database, change in
        try database.execute("CREATE TABLE IF NOT EXISTS starred(note TEXT NOT NULL)")
        try database.execute("INSERT INTO starred(note) VALUES (?)", [.text(change.note)])
    }

    @Test("an unknown kind never blocks a launch; after an update the retry applies it and observers hear of it; discard empties")
    func quarantineAcrossLaunchesAndUpdate() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        try fixture.controller.appendToInbox(.put(key: "before", value: "1"))
        let starred = try fixture.controller.appendToInbox(NoteStarred(note: "groceries"))
        try fixture.controller.appendToInbox(.put(key: "after", value: "2"))
        try await fixture.unlock()
        #expect(fixture.controller.phase == .ready)
        #expect(try await fixture.value("before") == "1")
        #expect(try await fixture.value("after") == "2")
        let kept = try await fixture.controller.perform("list") { try await $0.quarantinedInboxRecords() }
        #expect(kept.map(\.id) == [starred])

        // Relaunch: still ready, the record still kept.
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        fixture.controller = fixture.makeController()
        await fixture.launch()
        #expect(fixture.controller.phase == .ready)
        #expect(try await fixture.controller.perform("list") { try await $0.quarantinedInboxRecords() }.count == 1)

        // The app updates: a handler for the kind; the retry applies it and the report reaches observers.
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        fixture.inboxHandlers = Self.updatedHandlers
        fixture.controller = fixture.makeController()
        var reports: [InboxMergeReport] = []
        fixture.controller.observe { if case .inboxMerged(let report) = $0 { reports.append(report) } }
        await fixture.launch()
        let report = try await fixture.controller.retryQuarantinedInboxRecords()
        #expect(report.merged == [starred])
        #expect(reports.last?.merged == [starred])
        #expect(try await fixture.controller.perform("note") { try await $0.read { try $0.scalar("SELECT note FROM starred")?.string } } == "groceries")

        // Another unknown record, discarded.
        try fixture.controller.appendToInbox(kind: "from-the-future", key: "k", value: "v")
        await fixture.controller.waitUntilIdle()
        let discarded = try await fixture.controller.perform("discard") { try await $0.discardQuarantinedInboxRecords() }
        #expect(discarded == 1)
        #expect(try await fixture.controller.perform("list") { try await $0.quarantinedInboxRecords() }.isEmpty)
    }

    @Test("a record another process appends while the store is attached is merged by the poll, with no call from the app")
    func pollMergesForeignAppends() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        var reports: [InboxMergeReport] = []
        fixture.controller.observe { if case .inboxMerged(let report) = $0 { reports.append(report) } }
        // Another process (an extension) has only the files: it appends through a LockedInbox of its own.
        let extensionInbox = LockedInbox(files: StoreFiles(database: fixture.storePath))
        let id = try extensionInbox.append(.put(key: "from-extension", value: "hello"))
        await fixture.advance(.milliseconds(999))
        #expect(reports.isEmpty)
        await fixture.advance(.milliseconds(1))
        #expect(reports.map(\.merged) == [[id]])
        #expect(try await fixture.value("from-extension") == "hello")
    }
}
