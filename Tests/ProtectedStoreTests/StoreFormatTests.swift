import TestSupport
import EncryptedSQLite
import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// Stores made before their format was recorded still open, with the settings they were written with.
@Suite("Store format: stores from earlier builds")
struct StoreFormatAttachTests {
    @Test("a store written by main before formats were recorded (v1 key file, a log not checkpointed, sealed inbox record) attaches with every row")
    func storeFromMainAttaches() async throws {
        let fixture = try StoreFormatFixture()
        let keyFile = try StoreKeyFile.load(from: fixture.storePath + ".key")
        #expect(keyFile.version == 1 && keyFile.storeFormat == .sqlcipher3Raw4096)
        #expect(FileManager.default.fileExists(atPath: fixture.storePath + "-wal"), "the log main left is there")
        let device = try fixture.unlockedDevice()
        let coordinator = try await StoreCoordinator.attach(.init(path: fixture.storePath), keys: device)
        #expect(coordinator.inboxReportAtAttach.merged.count == 1, "the record main sealed merges")
        let rows = try await coordinator.read { database in
            try database.rows("SELECT key, value FROM entries").map { ($0[0].string ?? "", $0[1].string ?? "") }
        }
        #expect(Dictionary(uniqueKeysWithValues: rows) == StoreFormatFixture.rowsAfterAttach)
        #expect(try await coordinator.read { try $0.integrityCheck() } == ["ok"])
        await coordinator.close()
        device.powerOff()
    }

    @Test("an attach that fails says the store's format and the linked SQLCipher")
    func failedAttachNamesFormat() async throws {
        let fixture = try StoreFormatFixture()
        // Page 1 damaged: the key (authenticated by its key file) no longer opens the store.
        let handle = try #require(FileHandle(forUpdatingAtPath: fixture.storePath))
        try handle.seek(toOffset: 100)
        try handle.write(contentsOf: Data([0xde, 0xad, 0xbe, 0xef]))
        try handle.close()
        try FileManager.default.removeItem(atPath: fixture.storePath + "-wal")
        let device = try fixture.unlockedDevice()
        let error = await #expect(throws: StoreError.self) {
            _ = try await StoreCoordinator.attach(.init(path: fixture.storePath), keys: device)
        }
        let library = try #require(Database.linkedSQLCipher)
        #expect(error?.code == .storeDamaged)
        #expect(
            error?.message.contains("format 1 (SQLCipher 3, 4096-byte pages, HMAC-SHA1) with \(library)") == true,
            "\(String(describing: error))")
        device.powerOff()
    }
}

/// SQLCipher 4, a second implementation, opens the stores the library writes with only the key and the
/// settings keys/README.md documents: a store's data is never locked into this library or its SQLCipher.
@Suite(
    "SQLCipher 4 oracle",
    .enabled(if: SQLCipher4Oracle.isAvailable, "pip could not install sqlcipher3-binary (see the line above: no network?)"))
struct SQLCipher4OracleTests {
    /// The settings keys/README.md documents for SQLCipher 4, read from the file.
    static func documentedPragmas() throws -> [String] {
        let readme = try String(contentsOfFile: SQLCipher4Oracle.packageRoot + "/keys/README.md", encoding: .utf8)
        let marker = try #require(readme.range(of: "SQLCipher 4 program, the `sqlcipher` shell"))
        let rest = readme[marker.upperBound...]
        let open = try #require(rest.range(of: "```\n"))
        let close = try #require(rest[open.upperBound...].range(of: "```"))
        let lines = rest[open.upperBound..<close.lowerBound].split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("PRAGMA key") == true, "the block starts with the key")
        return lines.filter { $0.hasPrefix("PRAGMA ") && !$0.hasPrefix("PRAGMA key") }
    }

    @Test("a store with rows, a log not yet checkpointed and a quarantined inbox record reads the same in SQLCipher 4, integrity-checked")
    func storeWithLogAndQuarantine() throws {
        let fixture = try InboxFixture()
        try fixture.database.execute("CREATE TABLE kinds(n INTEGER, t TEXT, b BLOB, z)")
        try fixture.database.transaction {
            for index in 0..<300 {
                try fixture.database.execute(
                    "INSERT INTO kinds VALUES (?, ?, ?, NULL)",
                    [.integer(Int64(index) << 33), .text("row \(index) ☕"), .blob([UInt8(index & 0xff), 0, 0xff])])
            }
        }
        try fixture.put("first", "1")
        let starred = try fixture.inbox.append(NoteStarred(note: "groceries"))
        try fixture.put("second", "2")
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        #expect(report.quarantined.map(\.id) == [starred], "one record is in quarantine")
        // The writer is still open: what was written is in the log, not the store file. A copy of both, as a
        // backup tool or a crash would leave them.
        let copies = TemporaryDirectory()
        let copy = copies.file("copy.sqlite")
        let log = try #require(FileManager.default.contents(atPath: fixture.storePath + "-wal"))
        #expect(log.count > 32, "the log holds frames not checkpointed")
        try FileManager.default.copyItem(atPath: fixture.storePath, toPath: copy)
        try log.write(to: URL(fileURLWithPath: copy + "-wal"))
        let expected = try tablesAndRows(of: fixture.database)
        #expect(expected["inbox_quarantine"]?.count == 1)

        let keyHex = try fixture.storeKey.withUnsafeBytes { Array($0) }.hex
        let answer = try SQLCipher4Oracle.read(databases: [copy], keyHex: keyHex, pragmas: try Self.documentedPragmas())
        #expect(answer.cipherVersion.hasPrefix("4."))
        let reading = try #require(answer.databases[copy])
        #expect(reading.integrity.isEmpty, "cipher_integrity_check: \(reading.integrity)")
        #expect(tablesAndRows(of: reading) == expected)
    }

    @Test("a store closed by the library (log checkpointed), and the store main wrote, read the same in SQLCipher 4")
    func closedStoreAndFixture() async throws {
        let directory = TemporaryDirectory()
        let key = try SecureBytes.random(count: 32)
        let path = directory.file("closed.sqlite")
        let database = try Database(path: path, key: key)
        try DatabaseMigrator.keyValue.migrate(database)
        try database.transaction {
            for index in 0..<2000 { try database.execute("INSERT INTO entries(key, value) VALUES (?, ?)", [.text("k\(index)"), .text(String(repeating: "v", count: index % 300))]) }
        }
        let expected = try tablesAndRows(of: database)
        database.close()
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0) > 40 * 4096, "many pages")

        let closed = try SQLCipher4Oracle.read(
            databases: [path], keyHex: try key.withUnsafeBytes { Array($0) }.hex, pragmas: try Self.documentedPragmas())
        let closedReading = try #require(closed.databases[path])
        #expect(closedReading.integrity.isEmpty)
        #expect(tablesAndRows(of: closedReading) == expected)

        // main's store, with the log main left: read before anything of this build opens it.
        let fixture = try StoreFormatFixture()
        let device = try fixture.unlockedDevice()
        let keyHex = try fixture.storeKeyHex(device)
        device.powerOff()
        let answer = try SQLCipher4Oracle.read(databases: [fixture.storePath], keyHex: keyHex, pragmas: try Self.documentedPragmas())
        let reading = try #require(answer.databases[fixture.storePath])
        #expect(reading.integrity.isEmpty)
        let entries = (reading.tables["entries"] ?? []).map { row in (row[0].text ?? "", row[1].text ?? "") }
        #expect(Dictionary(uniqueKeysWithValues: entries) == StoreFormatFixture.rowsOnDisk)
    }

    @Test("the oracle can fail: a setting other than the documented one does not open a store")
    func oracleRejectsOtherSettings() throws {
        let directory = TemporaryDirectory()
        let key = try SecureBytes.random(count: 32)
        let path = directory.file("store.sqlite")
        let database = try Database(path: path, key: key)
        try database.execute("CREATE TABLE t(a); INSERT INTO t VALUES (1)")
        database.close()
        let pragmas = try Self.documentedPragmas().map { $0.replacingOccurrences(of: "HMAC_SHA1", with: "HMAC_SHA512") }
        #expect(throws: SQLCipher4Oracle.Failure.self) {
            _ = try SQLCipher4Oracle.read(databases: [path], keyHex: try key.withUnsafeBytes { Array($0) }.hex, pragmas: pragmas)
        }
    }
}
