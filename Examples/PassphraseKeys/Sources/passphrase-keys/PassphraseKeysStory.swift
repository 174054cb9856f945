import Foundation
import PassphraseKeySource
import ProtectedStore
import ProtectedStoreTesting

/// A locked launch on a key source written outside the package, which keeps its keys in a folder of its own,
/// apart from the stores' state directory: the app launches while its source is locked, queues work, unlocks
/// with the passphrase, locks again, and relaunches from disk; no key file is ever beside the store. Then the
/// key-source conformance suite runs on the source. Exits 0 when every step behaved as expected, 1 with what
/// happened otherwise.
@main
@MainActor
enum PassphraseKeysStory {
    static func main() async {
        let root = FileManager.default.temporaryDirectory.path + "/passphrase-keys-\(UUID().uuidString)"
        do {
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            try await run(in: root)
            try? FileManager.default.removeItem(atPath: root)
            print("All steps behaved as expected.")
        } catch {
            FileHandle.standardError.write(Data("passphrase-keys: FAILED: \(error)\n(state kept in \(root))\n".utf8))
            exit(1)
        }
    }

    static func run(in root: String) async throws {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create notes") { db in
            try db.execute("CREATE TABLE notes(body TEXT NOT NULL)")
        }
        // The stores' state directory, and the key source's own folder apart from it (a keychain's place).
        let stateDirectory = root + "/state"
        let keyring = root + "/keyring"
        for folder in [stateDirectory, keyring] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        }
        let store = StoreConfiguration(path: stateDirectory + "/notes.sqlite", protectionClass: .complete, migrator: migrator)
        let passphrase = try SecureBytes(utf8: "correct horse battery staple")
        defer { passphrase.wipe() }

        step("1. a new key source, locked; the app launches in the background and queues a write")
        let keys = try PassphraseKeySource.create(in: keyring, passphrase: passphrase, kdf: .minimal)
        let controller = DataController(configuration: .init(store: store), keys: keys)
        controller.launch(LaunchOptions(reason: .location))
        let phases = controller.phases()
        try await expect(phases, .waitingForProtectedData)
        let added = try controller.submit("add a note") { coordinator in
            try await coordinator.write { db in try db.execute("INSERT INTO notes(body) VALUES ('written while locked')") }
        }
        try check(controller.queuedOperationCount == 1, "one operation queued, found \(controller.queuedOperationCount)")

        step("2. a wrong passphrase: refused, the store still waits, nothing ran")
        do {
            try keys.unlock(passphrase: SecureBytes(utf8: "wrong"))
            throw StoryFailure("a wrong passphrase unlocked the source")
        } catch PassphraseKeySource.Failure.wrongPassphrase {}
        try check(controller.phase == .waitingForProtectedData, "still waiting, found \(controller.phase)")

        step("3. the passphrase: the store attaches, the queued write runs once")
        try keys.unlock(passphrase: passphrase)
        try await expect(phases, .ready)
        guard case .completed = await added.result() else { throw StoryFailure("the queued write did not complete: \(String(describing: added.outcome))") }
        let count = try await controller.perform("count") { try await $0.read { db in try db.fetchValues(Int.self, "SELECT count(*) FROM notes")[0] } }
        try check(count == 1, "one note, found \(count)")

        step("4. the app locks its source: the class-A store closes, new work waits")
        keys.lock()
        try await expect(phases, .waitingForProtectedData)
        try check(controller.coordinator == nil, "no coordinator while locked")
        await controller.terminate()

        step("5. a relaunch from disk: the source opens locked, the passphrase brings the note back")
        let reopened = try PassphraseKeySource(directory: keyring)
        let second = DataController(configuration: .init(store: store), keys: reopened)
        second.launch()
        let secondPhases = second.phases()
        try await expect(secondPhases, .waitingForProtectedData)
        try reopened.unlock(passphrase: passphrase)
        try await expect(secondPhases, .ready)
        let notes = try await second.perform("read") { try await $0.read { db in try db.fetchValues(String.self, "SELECT body FROM notes") } }
        try check(notes == ["written while locked"], "the note, found \(notes)")
        reopened.lock()
        await second.terminate()

        step("6. the keys live where the source keeps them: nothing of them in the state directory")
        let beside = try FileManager.default.contentsOfDirectory(atPath: stateDirectory).sorted()
        try check(!beside.contains { $0.hasSuffix(".key") || $0.contains("passphrase") }, "key files in the state directory: \(beside)")
        try check(!beside.contains { $0.hasSuffix(".creating") }, "a creation marker left behind: \(beside)")

        step("7. the key-source conformance suite (ProtectedStoreTesting) on the source")
        let conformanceStores = root + "/conformance"
        try FileManager.default.createDirectory(atPath: conformanceStores, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let failures = await StoreKeySourceConformance.check(
            reopened, storesIn: conformanceStores,
            lock: { source in await MainActor.run { source.lock() } },
            unlock: { source in try await MainActor.run { try source.unlock(passphrase: passphrase) } })
        try check(failures.isEmpty, "the source breaks the key-source contract: \(failures.map(\.description).joined(separator: "; "))")
    }

    static func step(_ title: String) { print(title) }

    /// Waits for `phase` on the stream (skipping the ones before it), for at most 10 s.
    static func expect(_ phases: AsyncStream<DataController.Phase>, _ phase: DataController.Phase) async throws {
        let found = try await withThrowingTaskGroup(of: DataController.Phase?.self) { group in
            group.addTask { for await next in phases where next == phase { return next }; return nil }
            group.addTask { try await Task.sleep(for: .seconds(10)); return nil }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        try check(found == phase, "expected the phase \(phase.name), it never came")
    }
}

/// A step that did not behave as expected.
struct StoryFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func check(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    if !condition { throw StoryFailure(message()) }
}
