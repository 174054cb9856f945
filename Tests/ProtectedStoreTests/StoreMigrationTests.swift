import DiskModel
import TestSupport
import EncryptedSQLite
import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore
import StoreConcurrency

/// A fault fixture's store with rows, most of them deleted again: pages on the free list, which a rewrite
/// (`sqlcipher_export` into a new file) leaves behind — so the store shows whether it is the old file or the
/// rewrite.
func storeWithFreePages(_ fixture: FaultFixture) async throws {
    try await fixture.withStore { coordinator in
        try await coordinator.write { database in
            for index in 0..<120 {
                try database.execute("INSERT INTO entries(key, value) VALUES (?, ?)", [.text("gone\(index)"), .text(String(repeating: "x", count: 900))])
            }
        }
        for index in 0..<4 { try await fixture.put("kept\(index)", "value \(index)", in: coordinator) }
        try await coordinator.write { try $0.execute("DELETE FROM entries WHERE key LIKE 'gone%'") }
    }
}

/// The pages on the store's free list (0 once rewritten).
func freePages(_ fixture: FaultFixture) async throws -> Int64 {
    var pages: Int64 = -1
    try await fixture.withStore { coordinator in
        pages = try await coordinator.read { try $0.scalar("PRAGMA freelist_count")?.int64 ?? -1 }
    }
    return pages
}

/// `migrate`, and the rewrite machinery under it.
@Suite("Store migration")
struct StoreMigrationTests {
    @Test(
        "on SQLCipher 3, migrate refuses with migration-unsupported, naming the linked version and format 2, and touches nothing",
        .enabled(if: Database.linkedSQLCipher?.major == 3))
    func migrateRefusedOnSQLCipher3() async throws {
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        try await storeWithFreePages(fixture)
        let before = try Self.snapshot(fixture.root)
        let error = await #expect(throws: StoreError.self) {
            _ = try await StoreCoordinator.migrate(fixture.configuration, keys: fixture.device!)
        }
        let linked = try #require(Database.linkedSQLCipher)
        #expect(error?.code == .migrationUnsupported)
        #expect(error?.message.contains("SQLCipher \(linked.reported)") == true, "\(String(describing: error))")
        #expect(error?.message.contains("format 2 (SQLCipher 4, 4096-byte pages, HMAC-SHA512)") == true)
        #expect(error?.message.contains("SQLCipher 4 or later") == true)
        #expect(try Self.snapshot(fixture.root) == before, "no file was touched")
    }

    @Test(
        "the rewrite machinery itself refuses a format the linked SQLCipher cannot write before touching a file",
        .enabled(if: Database.linkedSQLCipher?.major == 3))
    func machineryRefusesUnwritableFormat() async throws {
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        try await storeWithFreePages(fixture)
        let before = try Self.snapshot(fixture.root)
        let error = await #expect(throws: StoreError.self) {
            _ = try await StoreCoordinator.rewrite(fixture.configuration, keys: fixture.device!, to: .sqlcipher4Raw4096, evenInSameFormat: false)
        }
        #expect(error?.code == .storeUnavailable)
        #expect(try Self.snapshot(fixture.root) == before, "no file was touched")
    }

    @Test("a compacting rewrite (format 1 into format 1) keeps every row, the store key and its identifier, and leaves no rewrite file")
    func compactingRewrite() async throws {
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        try await storeWithFreePages(fixture)
        #expect(try await freePages(fixture) > 10)
        let keyBefore = try StoreKeyFile.load(from: fixture.configuration.files.key)
        guard case .available(let storeKey) = try fixture.device!.lookUpStoreKey(forStoreAt: fixture.storePath) else {
            Issue.record("the key is available")
            return
        }
        let sizeBefore = try Self.size(fixture.storePath)
        let outcome = try await StoreCoordinator.rewrite(
            fixture.configuration, keys: fixture.device!, to: .sqlcipher3Raw4096, evenInSameFormat: true)
        #expect(outcome == .migrated(from: .sqlcipher3Raw4096, to: .sqlcipher3Raw4096))
        #expect(try Self.size(fixture.storePath) < sizeBefore / 2, "the free pages are gone")
        let keyAfter = try StoreKeyFile.load(from: fixture.configuration.files.key)
        #expect(keyAfter.storeID == keyBefore.storeID && keyAfter.storeFormat == .sqlcipher3Raw4096)
        #expect(keyAfter.bytes != keyBefore.bytes, "the key file was written again")
        guard case .available(let keyNow) = try fixture.device!.lookUpStoreKey(forStoreAt: fixture.storePath) else {
            Issue.record("the key is available")
            return
        }
        #expect(keyNow.constantTimeEquals(storeKey), "the same store key")
        for file in [fixture.configuration.files.rewrite, fixture.configuration.files.keyRewrite, fixture.configuration.files.rewriteTemporary] {
            #expect(!FileManager.default.fileExists(atPath: file), "\(file) is gone")
        }
        #expect(try await freePages(fixture) == 0)
        try await fixture.withStore { coordinator in
            let lost = try await fixture.lost(in: coordinator)
            let integrity = try await coordinator.read { try $0.integrityCheck() }
            #expect(lost.isEmpty)
            #expect(integrity == ["ok"])
        }
        let same = try await StoreCoordinator.rewrite(
            fixture.configuration, keys: fixture.device!, to: .sqlcipher3Raw4096, evenInSameFormat: false)
        #expect(same == .alreadyInFormat(.sqlcipher3Raw4096), "migrate to the store's own format changes nothing")
    }

    @Test("a rewrite of an attached store is refused with busy, and changes nothing")
    func refusedWhileAttached() async throws {
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        try await storeWithFreePages(fixture)
        let coordinator = try await StoreCoordinator.attach(fixture.configuration, keys: fixture.device!)
        let before = try Self.snapshot(fixture.root, skipping: ["-wal", "-shm"])
        let error = await #expect(throws: StoreError.self) {
            _ = try await StoreCoordinator.rewrite(fixture.configuration, keys: fixture.device!, to: .current, evenInSameFormat: true)
        }
        #expect(error?.code == .busy)
        #expect(try Self.snapshot(fixture.root, skipping: ["-wal", "-shm"]) == before)
        await coordinator.close()
    }

    @Test("the next attach undoes a rewrite not committed (its key file image still there) and finishes a committed one")
    func recoveryRule() async throws {
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        try await storeWithFreePages(fixture)
        let files = fixture.configuration.files
        // Not committed: a whole rewrite and the key image beside the old store: undone, the old store opens.
        let storeBytes = try Data(contentsOf: URL(fileURLWithPath: files.database))
        try storeBytes.write(to: URL(fileURLWithPath: files.rewrite))
        try Data(contentsOf: URL(fileURLWithPath: files.key)).write(to: URL(fileURLWithPath: files.keyRewrite))
        try await fixture.withStore { coordinator in
            let lost = try await fixture.lost(in: coordinator)
            #expect(lost.isEmpty)
        }
        #expect(!FileManager.default.fileExists(atPath: files.rewrite) && !FileManager.default.fileExists(atPath: files.keyRewrite))
        // Committed: the rewrite without the key image is renamed over the store — here an empty-schema
        // store under the same key, which is what the attach must then open.
        guard case .available(let storeKey) = try fixture.device!.lookUpStoreKey(forStoreAt: fixture.storePath) else {
            Issue.record("the key is available")
            return
        }
        let other = try Database(path: files.rewrite, key: storeKey)
        try other.execute("CREATE TABLE marker(x); INSERT INTO marker VALUES (42)")
        other.close()
        try await fixture.withStore { coordinator in
            let marker = try await coordinator.read { try $0.scalar("SELECT x FROM marker")?.int64 }
            #expect(marker == 42, "the rewrite replaced the store")
        }
        #expect(!FileManager.default.fileExists(atPath: files.rewrite))
    }

    @Test(
        "a store whose key file records format 2 does not attach on SQLCipher 3: store-unavailable naming format 2 and the linked library, nothing changed",
        .enabled(if: Database.linkedSQLCipher?.major == 3))
    func formatTwoStoreRefusedOnSQLCipher3() async throws {
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        try await storeWithFreePages(fixture)
        let recorded = try fixture.device!.storeKeyFile(forStoreAt: fixture.storePath, recording: .sqlcipher4Raw4096)
        try Data(recorded.bytes).write(to: URL(fileURLWithPath: fixture.configuration.files.key))
        let before = try Self.snapshot(fixture.root)
        let error = await #expect(throws: StoreError.self) { try await fixture.withStore() }
        #expect(error?.code == .storeUnavailable)
        #expect(error?.message.contains("format 2 (SQLCipher 4, 4096-byte pages, HMAC-SHA512)") == true, "\(String(describing: error))")
        #expect(error?.message.contains("SQLCipher \(try #require(Database.linkedSQLCipher).reported)") == true)
        #expect(try Self.snapshot(fixture.root) == before)
    }

    static func size(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? -1
    }

    /// Every file under `root` with its bytes.
    static func snapshot(_ root: String, skipping suffixes: [String] = []) throws -> [String: Data] {
        var files: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let name = enumerator?.nextObject() as? String {
            let path = root + "/" + name
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                !suffixes.contains(where: { name.hasSuffix($0) })
            else { continue }
            files[name] = try Data(contentsOf: URL(fileURLWithPath: path))
        }
        return files
    }
}

extension IOFaultSweepTests {
    @Test("store rewrite (the migrate machinery, format 1 into format 1): after a fault or a cut at any call, the next attach finds the old store or the rewrite, whole, with every acknowledged value and no rewrite file left", arguments: kinds)
    func storeRewrite(kind: DiskFaultSweep.Kind) async throws {
        let outcomes = LockedState<[String: Int]>([:])
        try await sweep("store rewrite", kind) {
            let fixture = FaultFixture()
            try fixture.setUpDevice()
            try fixture.unlock()
            try await storeWithFreePages(fixture)
            return fixture
        } operation: { fixture in
            _ = try await StoreCoordinator.rewrite(fixture.configuration, keys: fixture.device!, to: .current, evenInSameFormat: true)
        } check: { fixture, round, cut, violations in
            try await self.relaunchAndRequireAcknowledged(fixture, cut: cut, &violations)
            let files = fixture.configuration.files
            for file in [files.rewrite, files.keyRewrite, files.rewriteTemporary] where FileManager.default.fileExists(atPath: file) {
                violations.append(Violation(message: "\(file) is left after the attach"))
            }
            if try StoreKeyFile.load(from: files.key).storeFormat != .current {
                violations.append(Violation(message: "the key file records another format"))
            }
            var integrity: [String] = []
            try await fixture.withStore { integrity = try await $0.read { try $0.integrityCheck() } }
            if integrity != ["ok"] { violations.append(Violation(message: "integrity_check: \(integrity)")) }
            let rewritten = try await freePages(fixture) == 0
            outcomes.withLock { $0[rewritten ? "rewritten" : "old", default: 0] += 1 }
            if round.error == nil, !rewritten { violations.append(Violation(message: "said rewritten, and the old store is there")) }
        }
        let seen = outcomes.withLock { $0 }
        print("store rewrite, \(kind): outcomes \(seen)")
        #expect(seen["old", default: 0] >= 1 && seen["rewritten", default: 0] >= 1, "both outcomes occur: \(seen)")
    }
}
