import Foundation
import ProtectedStore
import ProtectedStoreTesting
import TestSupport
import Testing

/// Backup, restore and migrate of a store whose key source keeps its keys in memory (`MemoryKeySource`): no
/// key file beside the store, so every step must go through the source.
@Suite("Backup, restore and migrate through a key source", .timeLimit(.minutes(3)))
struct KeySourceBackupTests {
    /// A store attached through `keys` at `path`, holding `values`, closed again.
    private static func makeStore(at path: String, keys: some StoreKeyProvider, values: [String: String]) async throws {
        let coordinator = try await StoreCoordinator.attach(StoreConfiguration(path: path), keys: keys)
        do {
            for (key, value) in values.sorted(by: { $0.key < $1.key }) { try await coordinator.put(key, value) }
        } catch {
            await coordinator.close()
            throw error
        }
        await coordinator.close()
    }

    /// What the store at `path` holds, attached through `keys`.
    private static func entries(at path: String, keys: some StoreKeyProvider) async throws -> [String] {
        let coordinator = try await StoreCoordinator.attach(StoreConfiguration(path: path), keys: keys)
        let entries = try? await coordinator.allEntries().map { "\($0.key)=\($0.value)" }
        await coordinator.close()
        return try #require(entries)
    }

    /// A backup, sealed to a new recovery key, of a store attached through `keys`.
    private static func backUp(
        _ path: String, keys: some StoreKeyProvider, to backupPath: String
    ) async throws -> RecoveryPhrase {
        let (phrase, recoveryKey) = try RecoveryKey.create(kdf: .minimal)
        let coordinator = try await StoreCoordinator.attach(StoreConfiguration(path: path), keys: keys)
        let summary: BackupSummary
        do {
            summary = try await coordinator.backup(to: backupPath, recoveryKey: recoveryKey)
        } catch {
            await coordinator.close()
            throw error
        }
        await coordinator.close()
        #expect(summary.storeFormat == .current)
        return try RecoveryPhrase(typed: phrase.text)
    }

    /// A backup of a store on the simulated device (its key in a key file), holding `values`: a backup made
    /// without the memory source, for the tests of the restore alone.
    @MainActor
    private static func deviceBackup(to backupPath: String, values: [String: String]) async throws -> RecoveryPhrase {
        let environment = try ProtectedStoreTestEnvironment()
        let path = environment.storePath("device.sqlite")
        try await makeStore(at: path, keys: environment.device, values: values)
        return try await backUp(path, keys: environment.device, to: backupPath)
    }

    @Test("a store whose source keeps its key in memory is backed up and restored into a new path through that source, and the restored store reads back")
    func memorySourceBacksUpAndRestores() async throws {
        let stores = TemporaryDirectory()
        let outside = TemporaryDirectory()
        let keys = MemoryKeySource()
        let original = stores.file("app.sqlite")
        try await Self.makeStore(at: original, keys: keys, values: ["a": "1", "b": "2"])
        let phrase = try await Self.backUp(original, keys: keys, to: outside.file("app.backup"))

        let restored = stores.file("restored.sqlite")
        let summary = try await StoreBackup.restore(
            from: outside.file("app.backup"), phrase: phrase, into: StoreConfiguration(path: restored), keys: keys)
        #expect(summary.keptAside == nil)
        #expect(try await Self.entries(at: restored, keys: keys) == ["a=1", "b=2"])
        let names = try FileManager.default.contentsOfDirectory(atPath: stores.path)
        #expect(!names.contains { $0.hasSuffix(".key") }, "no key file beside a store: \(names)")
        #expect(!names.contains { $0.contains(".restoring-") }, "no staging file left: \(names)")
    }

    @Test("a restore over a store whose key only the source holds is refused (restore-target-exists naming the source); replacing, the old key is kept aside with the old store")
    func restoreKeepsASourcesKeyAside() async throws {
        let stores = TemporaryDirectory()
        let outside = TemporaryDirectory()
        let keys = MemoryKeySource()
        let phrase = try await Self.deviceBackup(to: outside.file("app.backup"), values: ["from": "backup"])

        // Only the source holds something of this store: its key, no file.
        let keyOnly = stores.file("key-only.sqlite")
        try keys.createStoreKey(forStoreAt: keyOnly, protectionClass: .complete).wipe()
        let refused = await #expect(throws: StoreError.self) {
            try await StoreBackup.restore(
                from: outside.file("app.backup"), phrase: phrase, into: StoreConfiguration(path: keyOnly), keys: keys)
        }
        #expect(refused?.code == .restoreTargetExists, "\(String(describing: refused))")
        #expect(refused?.message.contains("MemoryKeySource") == true, "\(String(describing: refused))")
        #expect(!FileManager.default.fileExists(atPath: keyOnly))

        // An existing store, replaced: its files and its key go aside together, and the old key still opens it.
        let target = stores.file("app.sqlite")
        try await Self.makeStore(at: target, keys: keys, values: ["old": "kept"])
        let oldRecord = try #require(try keys.storeKeyRecord(forStoreAt: target))
        let summary = try await StoreBackup.restore(
            from: outside.file("app.backup"), phrase: phrase, into: StoreConfiguration(path: target), keys: keys,
            replacingExisting: true)
        let aside = try #require(summary.keptAside)
        #expect(try await Self.entries(at: target, keys: keys) == ["from=backup"])
        #expect(try keys.storeKeyRecord(forStoreAt: target) != oldRecord, "the restored store has a key of its own")
        #expect(try keys.storeKeyRecord(forStoreAt: aside + "/app.sqlite") == oldRecord, "the old key is kept aside")
        #expect(try await Self.entries(at: aside + "/app.sqlite", keys: keys) == ["old=kept"])
    }

    @Test("a source that keeps keys in memory but cannot move them fails a restore with key-source-unsupported naming it, and the target is left as it was")
    func restoreWithASourceThatCannotMoveKeys() async throws {
        let stores = TemporaryDirectory()
        let outside = TemporaryDirectory()
        let memory = MemoryKeySource()
        let phrase = try await Self.deviceBackup(to: outside.file("app.backup"), values: ["a": "1"])

        let target = stores.file("app.sqlite")
        let before = try FileManager.default.contentsOfDirectory(atPath: stores.path).sorted()
        let failed = await #expect(throws: StoreError.self) {
            try await StoreBackup.restore(
                from: outside.file("app.backup"), phrase: phrase, into: StoreConfiguration(path: target),
                keys: KeysThatDoNotMove(memory: memory))
        }
        #expect(failed?.code == .keySourceUnsupported, "\(String(describing: failed))")
        #expect(failed?.message.contains("KeysThatDoNotMove") == true, "\(String(describing: failed))")
        #expect(failed?.message.contains("moveStoreKey") == true, "\(String(describing: failed))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: stores.path).sorted() == before)
        #expect(try memory.storeKeyRecord(forStoreAt: target) == nil)
    }

    @Test("migrate says a store whose source keeps its key in memory is in its format already; a rewrite, which replaces a key file, fails with key-source-unsupported and changes nothing")
    func migrateThroughAMemorySource() async throws {
        let stores = TemporaryDirectory()
        let keys = MemoryKeySource()
        let path = stores.file("app.sqlite")
        try await Self.makeStore(at: path, keys: keys, values: ["a": "1"])
        let configuration = StoreConfiguration(path: path)

        #expect(try await StoreCoordinator.migrate(configuration, keys: keys, to: .current) == .alreadyInFormat(.current))
        let failed = await #expect(throws: StoreError.self) {
            try await StoreCoordinator.rewrite(configuration, keys: keys, to: .current, evenInSameFormat: true)
        }
        #expect(failed?.code == .keySourceUnsupported, "\(String(describing: failed))")
        #expect(failed?.message.contains("MemoryKeySource") == true, "\(String(describing: failed))")
        #expect(try await Self.entries(at: path, keys: keys) == ["a=1"])
        let names = try FileManager.default.contentsOfDirectory(atPath: stores.path)
        #expect(!names.contains { $0.contains("rewrite") || $0.hasSuffix(".key") }, "\(names)")
    }
}

/// A source that keeps keys in memory (a `MemoryKeySource` behind it) and implements only the calls an attach
/// needs: no `moveStoreKey(from:to:)`, so it gets the default, which moves key files.
private struct KeysThatDoNotMove: StoreKeyProvider {
    let memory: MemoryKeySource

    func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup {
        try memory.lookUpStoreKey(forStoreAt: storePath)
    }
    func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes {
        try memory.createStoreKey(forStoreAt: storePath, protectionClass: protectionClass)
    }
    func storeKeyRecord(forStoreAt storePath: String) throws -> StoreKeyRecord? {
        try memory.storeKeyRecord(forStoreAt: storePath)
    }
}
