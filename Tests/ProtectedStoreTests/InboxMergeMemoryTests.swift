import CSQLCipher
import EncryptedSQLite
import Foundation
import SecureKeys
import Synchronization
import Testing

@_spi(Testing) @testable import ProtectedStore

/// What a merge holds while it applies records: bounded by a window and by SQLite's page cache, never growing
/// with the number of records (issue 26, "Speed and memory"). Measured with SQLite's own allocation counter
/// (`sqlite3_memory_used`), which counts exactly, unlike a process's resident size.
@Suite("Inbox merge memory")
struct InboxMergeMemoryTests {
    /// SQLite's memory in use each time the handler ran.
    final class Samples: Sendable {
        let values = Mutex<[Int64]>([])
    }

    @Test("SQLite's memory stays flat while a merge applies thousands of records with a handler that replaces rows")
    func sqliteMemoryStaysFlat() async {
        // In a process of its own: `sqlite3_memory_used` counts the whole process, and the tests running beside
        // this one open stores of their own (a clean-clone CI run saw 5.7 MB of theirs here).
        await #expect(processExitsWith: .success) {
            let growth = try InboxMergeMemoryTests.sqliteGrowthOverMerge()
            // Once the first records warmed the page cache, the rest add nothing that stays (a statement journal
            // kept for the whole merge grew by a page for every record: about 12 MB here).
            if growth >= 1 << 20 {
                FileHandle.standardError.write(Data("SQLite's memory grew by \(growth) bytes over 2,500 records\n".utf8))
                exit(1)
            }
        }
    }

    /// Merges 3,000 records with an app's `INSERT OR REPLACE` handler and returns how much SQLite's memory in use
    /// grew between the 500th record and the last; exits 2 when the merge itself goes wrong.
    static func sqliteGrowthOverMerge() throws -> Int64 {
        let fixture = try InboxFixture()
        // 50 keys written over and over: the table stays a few pages, so what grows is a journal, not data.
        try fixture.inbox.append(contentsOf: (0..<3_000).map { .put(key: "k\($0 % 50)", value: "value \($0)") })
        let samples = Samples()
        // An app's handler as apps write them: `INSERT OR REPLACE`, which needs a statement journal each time.
        let handlers = InboxHandlers().handlingKeyValue { database, change in
            samples.values.withLock { $0.append(sqlite3_memory_used()) }
            guard case .put(let key, let value) = change else { return }
            try database.execute("INSERT OR REPLACE INTO entries(key, value) VALUES (?, ?)", [.text(key), .text(value)])
        }
        let report = try fixture.inbox.merge(
            into: fixture.database, publicKey: fixture.publicKey, privateKey: fixture.privateKey, handlers: handlers)
        let values = samples.values.withLock { $0 }
        guard report.merged.count == 3_000, values.count == 3_000, try fixture.value("k49") == "value 2999" else { exit(2) }
        return values[2_999] - values[500]
    }

    @Test("the built-in put, bound in place: a large value reads back whole, one that is not UTF-8 is quarantined")
    func putBoundInPlace() throws {
        let fixture = try InboxFixture()
        var body = ByteWriter()
        body.writeText("broken")
        body.write(UInt32(2))
        body.write([0xff, 0xfe] as [UInt8])
        let payload = try InboxEntry.payload(id: .random(), kind: "put", schemaVersion: 1, body: body.bytes, sequence: 1)
        try Data(try InboxRecord.seal(payload, to: fixture.publicKey)).write(to: URL(fileURLWithPath: fixture.inbox.inboxPath))
        let large = String(repeating: "é", count: 1 << 19)
        try fixture.put("large", large)
        try fixture.put("small", "")
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(applied == ["large", "small"])
        #expect(report.quarantined.map(\.kind) == ["put"])
        #expect(report.quarantined.first?.reason.contains("no value") == true)
        #expect(try fixture.value("large") == large)
        #expect(try fixture.value("small") == "")
        #expect(try fixture.value("broken") == nil)
    }

    @Test("an entry opened into a window's shared buffer wipes only its own part of it")
    func sharedEntryWipesItsPart() throws {
        let first = try InboxEntry.payload(for: .put(key: "a", value: "1"), id: .init(bytes: Array(repeating: 1, count: 16)), sequence: 1)
        let second = try InboxEntry.payload(for: .put(key: "b", value: "2"), id: .init(bytes: Array(repeating: 2, count: 16)), sequence: 2)
        let buffer = try SecureBytes(count: first.count + second.count)
        try buffer.withUnsafeMutableBytes { bytes in
            try first.withUnsafeBytes { bytes.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            try second.withUnsafeBytes { (bytes.baseAddress! + first.count).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
        let entries = try buffer.withUnsafeBytes { bytes in
            [
                InboxEntry.decode(bytes, in: buffer, at: 0..<first.count, shared: true),
                InboxEntry.decode(bytes, in: buffer, at: first.count..<buffer.count, shared: true),
            ]
        }
        let a = try #require(entries[0])
        let b = try #require(entries[1])
        #expect(a.sequence == 1 && b.sequence == 2)
        a.wipe()
        #expect(!buffer.isWiped)
        #expect(try b.change == .put(key: "b", value: "2"))
        #expect(try buffer.withUnsafeBytes { $0[0..<first.count].allSatisfy { $0 == 0 } })
        buffer.wipe()
    }
}
