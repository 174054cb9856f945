import TestSupport
import EncryptedSQLite
import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// A device with a store of rows, a quarantined inbox record and a write-ahead log not yet checkpointed, its
/// recovery key, and a backup of it taken while it is attached.
final class BackupFixture {
    let source = FaultFixture(stateFolder: "state")
    let phrase: RecoveryPhrase
    let recoveryKey: RecoveryKey
    /// Every table of the store when the backup was taken.
    var expected: [String: [[String]]] = [:]
    /// Outside the state directory (a backup is never written inside it), on the same simulated disk.
    var backupPath: String { source.diskRoot + "/store.backup" }

    /// Makes the store and, with `backUp`, the backup.
    init(backUp: Bool = true) async throws {
        (phrase, recoveryKey) = try RecoveryKey.create(kdf: .minimal)
        try source.setUpDevice()
        try recoveryKey.write(to: RecoveryKey.path(forStoreAt: source.storePath))
        try source.unlock()
        try await source.withStore { coordinator in
            for index in 0..<40 { try await self.source.put("row\(index)", String(repeating: "v\(index)", count: index), in: coordinator) }
        }
        // Sealed while "locked", of a kind the app has no handler for: quarantined at the next attach.
        _ = try source.inbox.append(kind: "note-pinned", key: "pinned", value: "kept, never dropped")
        guard backUp else { return }
        try await source.withStore { coordinator in
            #expect(try await coordinator.quarantinedInboxRecords().count == 1)
            try await self.source.put("late", "written after the attach, still in the log", in: coordinator)
            let log = (try? FileManager.default.attributesOfItem(atPath: self.source.storePath + "-wal")[.size] as? Int) ?? 0
            #expect(log > 32, "the write-ahead log holds frames not checkpointed when the backup is taken")
            let summary = try await coordinator.backup(to: self.backupPath, recoveryKey: self.recoveryKey)
            #expect(summary.byteCount == UInt64((try FileManager.default.attributesOfItem(atPath: self.backupPath)[.size] as? Int) ?? 0))
            self.expected = try await coordinator.read { try tablesAndRows(of: $0) }
        }
    }

    /// The phrase as the user types it back.
    func typedPhrase() throws -> RecoveryPhrase { try RecoveryPhrase(typed: phrase.text) }
}

/// A second, new device: where a backup is restored.
final class NewDevice {
    let directory = TemporaryDirectory()
    let device: KeybagDevice
    var storePath: String { directory.file("app.sqlite") }
    var configuration: StoreConfiguration { StoreConfiguration(path: storePath) }

    init() throws {
        device = try KeybagDevice.setUp(
            in: directory.path, passcode: try SecureBytes(utf8: "another-device-5678"), configuration: .init(kdf: .minimal))
        try device.unlock(passcode: try SecureBytes(utf8: "another-device-5678"))
    }

    deinit { device.powerOff() }

    func restore(_ backup: String, phrase: RecoveryPhrase, replacing: Bool = false) async throws -> RestoreSummary {
        try await StoreBackup.restore(from: backup, phrase: phrase, into: configuration, keys: device, replacingExisting: replacing)
    }

    /// Every table of the store here, read through an attach.
    func tables(at path: String? = nil) async throws -> [String: [[String]]] {
        let coordinator = try await StoreCoordinator.attach(StoreConfiguration(path: path ?? storePath), keys: device)
        let tables: [String: [[String]]]
        do {
            tables = try await coordinator.read { try tablesAndRows(of: $0) }
        } catch {
            await coordinator.close()
            throw error
        }
        await coordinator.close()
        return tables
    }

    /// The store's files present now.
    var storeFiles: [String] { StoreBackup.files(ofStoreAt: storePath).filter { FileManager.default.fileExists(atPath: $0) } }
}

/// The tables a backup must carry: the app's rows and the inbox's quarantine (the inbox's bookkeeping of
/// merges is per device and may differ after the next attach's merge).
func carried(_ tables: [String: [[String]]]) -> [String: [[String]]] {
    tables.filter { ["entries", "inbox_quarantine", "inbox_sequence"].contains($0.key) }
}

func code(of error: any Error) -> StoreError.Code { StoreError(wrapping: error).code }

@Suite("Backup and restore", .serialized)
struct BackupTests {
    @Test("round trip: rows, a log not yet checkpointed and a quarantined inbox record come back on a new device")
    func roundTrip() async throws {
        let fixture = try await BackupFixture()
        #expect(fixture.expected["entries"]?.count == 41)
        #expect(fixture.expected["inbox_quarantine"]?.count == 1)
        let target = try NewDevice()
        let summary = try await target.restore(fixture.backupPath, phrase: try fixture.typedPhrase())
        #expect(summary.keptAside == nil)
        #expect(summary.recoveryKeyPath.map { try? RecoveryKey.load(from: $0) } == fixture.recoveryKey)
        let restored = try await target.tables()
        #expect(carried(restored) == carried(fixture.expected))
        let coordinator = try await StoreCoordinator.attach(target.configuration, keys: target.device)
        #expect(try await coordinator.quarantinedInboxRecords().map(\.kind) == ["note-pinned"])
        #expect(try await coordinator.value(forKey: "late") == "written after the attach, still in the log")
        await coordinator.close()
        // The restored store's key is the new device's: its key file unwraps with this device's class key.
        guard case .available(let key) = try target.device.lookUpStoreKey(forStoreAt: target.storePath) else {
            Issue.record("the restored store's key is not available on the new device")
            return
        }
        key.wipe()
    }

    @Test("the backup file holds no plaintext of the store's values")
    func noPlaintext() async throws {
        let fixture = try await BackupFixture()
        let bytes = try #require(FileManager.default.contents(atPath: fixture.backupPath))
        for needle in ["v39v39", "written after the attach", "kept, never dropped", "entries"] {
            #expect(bytes.range(of: Data(needle.utf8)) == nil, "\(needle) is in the backup in the clear")
        }
    }

    @Test("a wrong phrase is wrong-recovery-phrase, and nothing is written where the store would go")
    func wrongPhrase() async throws {
        let fixture = try await BackupFixture()
        let target = try NewDevice()
        await #expect { try await target.restore(fixture.backupPath, phrase: try RecoveryPhrase.generate()) } throws: {
            code(of: $0) == .wrongRecoveryPhrase
        }
        #expect(target.storeFiles.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: target.directory.path).filter { $0.hasPrefix("app.sqlite") }.isEmpty)
    }

    @Test("a mistyped phrase is recovery-phrase-mistyped before any key is derived")
    func mistypedPhrase() async throws {
        let fixture = try await BackupFixture()
        var text = try fixture.phrase.text.withUnsafeBytes { Array($0) }
        text[0] = text[0] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect { try RecoveryPhrase(typed: try text.withUnsafeBytes { try SecureBytes(copying: $0) }) } throws: {
            code(of: $0) == .recoveryPhraseMistyped
        }
    }

    @Test("a tampered byte anywhere (header, sealed key, database, tag) is backup-damaged, and nothing is restored", arguments: [
        10, 100, 184 + 16, 184 + 5000, -1,
    ])
    func tamperedByte(offset: Int) async throws {
        let fixture = try await BackupFixture()
        var bytes = try #require(FileManager.default.contents(atPath: fixture.backupPath))
        let index = offset < 0 ? bytes.count + offset : offset
        bytes[index] ^= 0x01
        let tampered = fixture.source.root + "/tampered.backup"
        try bytes.write(to: URL(fileURLWithPath: tampered))
        let target = try NewDevice()
        await #expect { try await target.restore(tampered, phrase: try fixture.typedPhrase()) } throws: { error in
            // A flipped byte in the Argon2id salt or cost derives another key pair: the header checksum says so first.
            code(of: error) == .backupDamaged
        }
        #expect(target.storeFiles.isEmpty, "\(target.storeFiles)")
    }

    @Test("a truncated backup is backup-damaged, and nothing is restored", arguments: [1, 100, 4096])
    func truncated(cut: Int) async throws {
        let fixture = try await BackupFixture()
        let bytes = try #require(FileManager.default.contents(atPath: fixture.backupPath))
        let truncated = fixture.source.root + "/truncated.backup"
        try bytes.prefix(bytes.count - cut).write(to: URL(fileURLWithPath: truncated))
        let target = try NewDevice()
        await #expect { try await target.restore(truncated, phrase: try fixture.typedPhrase()) } throws: {
            code(of: $0) == .backupDamaged
        }
        #expect(target.storeFiles.isEmpty)
    }

    @Test("a restore over an existing store is refused (restore-target-exists, nothing changed); with replacing it is kept aside, whole")
    func refusesToReplace() async throws {
        let fixture = try await BackupFixture()
        let target = try NewDevice()
        let old = try await StoreCoordinator.attach(target.configuration, keys: target.device)
        try await old.put("old", "the new device's own row")
        await old.close()
        let before = try await target.tables()
        await #expect { try await target.restore(fixture.backupPath, phrase: try fixture.typedPhrase()) } throws: {
            code(of: $0) == .restoreTargetExists && "\(StoreError(wrapping: $0))".contains(target.storePath)
        }
        #expect(try await target.tables() == before, "the refused restore changed nothing")

        let summary = try await target.restore(fixture.backupPath, phrase: try fixture.typedPhrase(), replacing: true)
        let aside = try #require(summary.keptAside)
        #expect(carried(try await target.tables()) == carried(fixture.expected))
        let kept = aside + "/app.sqlite"
        #expect(try await target.tables(at: kept)["entries"] == before["entries"], "the old store opens, whole, from where it was kept")
    }

    @Test("backup refuses to overwrite a file unless asked, and replaces it atomically when asked")
    func backupDoesNotOverwrite() async throws {
        let fixture = try await BackupFixture()
        let original = try #require(FileManager.default.contents(atPath: fixture.backupPath))
        try await fixture.source.withStore { coordinator in
            await #expect { try await coordinator.backup(to: fixture.backupPath, recoveryKey: fixture.recoveryKey) } throws: {
                code(of: $0) == .alreadyExists
            }
            #expect(FileManager.default.contents(atPath: fixture.backupPath) == original)
            _ = try await coordinator.backup(to: fixture.backupPath, recoveryKey: fixture.recoveryKey, replacingExisting: true)
        }
        #expect(FileManager.default.contents(atPath: fixture.backupPath) != original, "a new backup (new data key)")
        let target = try NewDevice()
        _ = try await target.restore(fixture.backupPath, phrase: try fixture.typedPhrase())
        #expect(carried(try await target.tables())["entries"] == carried(fixture.expected)["entries"])
    }

    @Test("a backup runs while a write transaction is open on the writer, and holds what was committed before it", .timeLimit(.minutes(1)))
    func writerIsNotStopped() async throws {
        let fixture = try await BackupFixture(backUp: false)
        try await fixture.source.withStore { coordinator in
            let entered = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            // The writer's thread is held inside an open transaction until the backup has finished: a backup that
            // needed the writer (or its lock) would never finish.
            let held = Task {
                try await coordinator.write { db in
                    try db.execute("INSERT INTO entries(key, value) VALUES ('held', 'not committed when the backup ran')")
                    entered.signal()
                    release.wait()
                }
            }
            entered.wait()
            let summary: BackupSummary
            do {
                summary = try await coordinator.backup(to: fixture.backupPath, recoveryKey: fixture.recoveryKey)
            } catch {
                release.signal()
                _ = try? await held.value
                throw error
            }
            release.signal()
            try await held.value
            #expect(summary.byteCount > 0)
            #expect(try await coordinator.value(forKey: "held") != nil)
        }
        let target = try NewDevice()
        _ = try await target.restore(fixture.backupPath, phrase: try fixture.typedPhrase())
        let entries = try #require(try await target.tables()["entries"])
        #expect(entries.count == 40, "the 40 committed rows, not the one in the open transaction")
        #expect(!entries.contains { $0.first == "text:held" })
    }
}

/// SQLCipher 4, a second implementation, reads a restored store with only the new device's store key and the
/// settings keys/README.md documents — straight after the restore, before this library opens it again.
@Suite(
    "SQLCipher 4 oracle: restored stores",
    .enabled(if: SQLCipher4Oracle.isAvailable, "pip could not install sqlcipher3-binary (see the line above: no network?)"))
struct RestoredStoreOracleTests {
    @Test("a restored store reads in SQLCipher 4 with the new device's key, integrity-checked, with every row and the quarantined record")
    func restoredStoreReadsInSQLCipher4() async throws {
        let fixture = try await BackupFixture()
        let target = try NewDevice()
        _ = try await target.restore(fixture.backupPath, phrase: try fixture.typedPhrase())
        guard case .available(let key) = try target.device.lookUpStoreKey(forStoreAt: target.storePath) else {
            Issue.record("the restored store's key is not available")
            return
        }
        let keyHex = try key.withUnsafeBytes { Array($0) }.hex
        key.wipe()
        let answer = try SQLCipher4Oracle.read(
            databases: [target.storePath], keyHex: keyHex, pragmas: try SQLCipher4OracleTests.documentedPragmas())
        let reading = try #require(answer.databases[target.storePath])
        #expect(reading.integrity.isEmpty, "cipher_integrity_check: \(reading.integrity)")
        #expect(tablesAndRows(of: reading) == fixture.expected, "every table, as the source store had it at the backup")
    }
}
