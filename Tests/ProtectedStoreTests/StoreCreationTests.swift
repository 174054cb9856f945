import DiskModel
import Foundation
import ProtectedData
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// The store creation marker (`<store>.creating`, keys/README.md): it describes one creation in progress, and
/// never lets a lost store be replaced by a new empty one.
@Suite("Store creation", .timeLimit(.minutes(3)))
@MainActor
struct StoreCreationTests {
    func relaunch(_ fixture: ControllerFixture) async {
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        fixture.controller = fixture.makeController()
        await fixture.launch()
    }

    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    func move(_ path: String, to destination: String) throws {
        try FileManager.default.moveItem(atPath: path, toPath: destination)
    }

    @Test("an attach refused with store-exists-without-key leaves no marker: when the key comes back and the store is missing, the store is reported lost, not re-created empty")
    func refusedAttachLeavesNoMarker() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.controller.coordinator?.put("k", "v")
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        let files = StoreFiles(database: fixture.storePath)
        let aside = fixture.directory.file("aside")
        try FileManager.default.createDirectory(atPath: aside, withIntermediateDirectories: false)

        // The key file goes missing: the attach is refused, and nothing of a creation is left behind.
        try move(files.key, to: aside + "/app.sqlite.key")
        await relaunch(fixture)
        #expect(fixture.presented.map(\.code.name) == ["store-exists-without-key"])
        #expect(!exists(files.creationMarker), "a refused creation leaves no marker")
        #expect(!exists(files.key), "no key is made over existing data")

        // The key file comes back and the store file goes missing: a lost store, never an empty new one.
        try move(aside + "/app.sqlite.key", to: files.key)
        try move(files.database, to: aside + "/app.sqlite")
        await relaunch(fixture)
        #expect(fixture.presented.map(\.code.name) == ["store-exists-without-key", "store-unavailable"])
        #expect(fixture.controller.coordinator == nil)
        #expect(!exists(files.database), "no empty store in place of a lost one")

        // With its file back, the store attaches with its data.
        try move(aside + "/app.sqlite", to: files.database)
        await relaunch(fixture)
        #expect(fixture.controller.phase == .ready)
        #expect(try await fixture.value("k") == "v")
    }

    @Test("a creation that ends without a key (the device is locked) removes its marker")
    func creationWithoutKeyRemovesMarker() async throws {
        let fixture = try ControllerFixture()
        try await fixture.rebootDevice()  // before the first unlock: the class key is not held
        await fixture.launch()
        #expect(fixture.controller.phase == .waitingForProtectedData)
        let files = StoreFiles(database: fixture.storePath)
        #expect(!exists(files.key))
        #expect(!exists(files.creationMarker), "no creation is in progress")
        try await fixture.unlock()
        #expect(fixture.controller.phase == .ready)
        #expect(!exists(files.creationMarker))
    }

    @Test("a creation that fails with a source that cannot tell whether it made a key keeps its marker, which names no key and says the store was to be built")
    func failedCreationWithUncertainSourceKeepsItsMarker() throws {
        let fixture = try ControllerFixture()
        let files = StoreFiles(database: fixture.storePath)
        #expect(throws: UncertainKeySource.Failure.self) {
            _ = try StoreCoordinator.createStoreKey(.init(path: fixture.storePath), keys: UncertainKeySource())
        }
        let marker = try StoreCreationMarker(bytes: fileBytes(files.creationMarker), path: files.creationMarker)
        #expect(marker.stage == .building)
    }

    @Test("a marker that names another key file, names none beside an inbox key file (of this version's creation or an older one), or is an older empty one never re-creates a missing store: store-unavailable, nothing changed")
    func markerOfAnotherCreationIsNotEnough() async throws {
        let other = try ControllerFixture()
        let (otherKey, otherRecord) = try StoreCoordinator.createStoreKey(.init(path: other.storePath), keys: other.device)
        otherKey.wipe()
        let markers: [(String, [UInt8], reason: String)] = [
            ("another key's", StoreCreationMarker(stage: .keyMade(storeID: otherRecord.storeID)).bytes, "belongs to the creation of another key"),
            ("no key's", StoreCreationMarker(stage: .makingKey).bytes, "shows that the key's store existed"),
            ("a build's", StoreCreationMarker(stage: .building).bytes, "shows that the key's store existed"),
            ("an older empty", [], "names no creation (key-file-damaged"),
        ]
        for (name, marker, reason) in markers {
            let fixture = try ControllerFixture()
            let key = try fixture.device.createStoreKey(forStoreAt: fixture.storePath, protectionClass: .complete)
            key.wipe()
            let files = StoreFiles(database: fixture.storePath)
            _ = FileManager.default.createFile(
                atPath: files.creationMarker, contents: Data(marker), attributes: [.posixPermissions: 0o600])
            // What a store's first attach leaves beside its key file.
            _ = FileManager.default.createFile(atPath: files.inboxKey, contents: Data(), attributes: [.posixPermissions: 0o600])
            await fixture.launch()
            #expect(fixture.presented.map(\.code.name) == ["store-unavailable"], "\(name) marker")
            let message = fixture.presented.first?.message ?? ""
            #expect(message.contains(files.database), "\(name) marker: the message names the store file")
            #expect(message.contains(reason), "\(name) marker: \(message)")
            #expect(!exists(files.database), "\(name) marker: no empty store in place of a lost one")
            #expect(fileBytes(files.creationMarker) == marker, "\(name) marker: left as it is")
        }
    }

    @Test("the marker is written before the key and says the store is being built; while it is there, a missing store, or one beside it, is built")
    func markerSaysTheStoreIsBeingBuilt() throws {
        let fixture = try ControllerFixture()
        let (key, record) = try StoreCoordinator.createStoreKey(.init(path: fixture.storePath), keys: fixture.device)
        key.wipe()
        let files = StoreFiles(database: fixture.storePath)
        let marker = try StoreCreationMarker(bytes: fileBytes(files.creationMarker), path: files.creationMarker)
        #expect(record == StoreKeyRecord(try StoreKeyFile.load(from: files.key)))
        #expect(marker.stage == .building)
        #expect(!marker.names(record), "a marker of stage 3 names no key")
        #expect(try StoreCoordinator.resumption(files, record: record) == .build)
        _ = FileManager.default.createFile(atPath: files.database, contents: Data(count: 8192), attributes: [.posixPermissions: 0o600])
        #expect(try StoreCoordinator.resumption(files, record: record) == .build)
        try StoreCreationMarker.remove(at: files.creationMarker, in: .real)
        #expect(try StoreCoordinator.resumption(files, record: record) == .open)
    }

    @Test("a store file, its log and its journal beside a marker of stage 3 are an interrupted creation's: the launch moves the store file aside (the empty log is removed, the index too), builds the store and attaches")
    func unfinishedStoreIsMovedAside() async throws {
        let fixture = try ControllerFixture()
        let files = try fixture.interruptCreationAfterTheKey()
        let built = Data("what the build wrote before the crash".utf8)
        _ = FileManager.default.createFile(atPath: files.database, contents: built, attributes: [.posixPermissions: 0o600])
        _ = FileManager.default.createFile(atPath: files.writeAheadLog, contents: Data(), attributes: [.posixPermissions: 0o600])
        _ = FileManager.default.createFile(atPath: files.sharedMemory, contents: Data(count: 32768), attributes: [.posixPermissions: 0o600])
        await fixture.launch()
        #expect(fixture.presented.isEmpty, "\(fixture.presented)")
        #expect(fixture.controller.phase == .ready)
        #expect(!exists(files.creationMarker))
        #expect(FileManager.default.contents(atPath: files.unfinished) == built, "moved aside byte for byte")
        #expect(!exists(files.unfinished + "-wal"), "an empty log holds nothing: removed")
        try await fixture.controller.coordinator?.put("k", "v")
        #expect(try await fixture.value("k") == "v")
    }

    @Test("a symbolic link or a FIFO where an interrupted creation's store file would be is io-error: nothing is moved, and the launch attaches once it is gone")
    func unfinishedStoreThatIsNotAFileIsRefused() async throws {
        for kind in ["link", "fifo"] {
            let fixture = try ControllerFixture()
            let files = try fixture.interruptCreationAfterTheKey()
            let target = fixture.directory.file("elsewhere")
            _ = FileManager.default.createFile(atPath: target, contents: Data("not the store's".utf8))
            if kind == "link" {
                try FileManager.default.createSymbolicLink(atPath: files.database, withDestinationPath: target)
            } else {
                #expect(mkfifo(files.database, 0o600) == 0)
            }
            await fixture.launch()
            #expect(fixture.presented.map(\.code.name) == ["io-error"], "\(kind)")
            #expect(!exists(files.unfinished), "\(kind): nothing moved")
            #expect(FileManager.default.contents(atPath: target) == Data("not the store's".utf8))
            try FileManager.default.removeItem(atPath: files.database)
            await relaunch(fixture)
            #expect(fixture.controller.phase == .ready, "\(kind)")
        }
    }

    @Test("a folder where an interrupted creation's store file would be moved aside fails the launch with io-error naming it; the unfinished store stays where it was, and the launch attaches once the folder is gone")
    func unfinishedStoreWithNowhereToGo() async throws {
        let fixture = try ControllerFixture()
        let files = try fixture.interruptCreationAfterTheKey()
        let built = Data("what the build wrote before the crash".utf8)
        _ = FileManager.default.createFile(atPath: files.database, contents: built, attributes: [.posixPermissions: 0o600])
        try FileManager.default.createDirectory(atPath: files.unfinished + "/inside", withIntermediateDirectories: true)
        await fixture.launch()
        #expect(fixture.presented.map(\.code.name) == ["io-error"])
        #expect(fixture.presented.first?.message.contains(files.unfinished) == true, "\(fixture.presented)")
        #expect(FileManager.default.contents(atPath: files.database) == built, "nothing moved")
        try FileManager.default.removeItem(atPath: files.unfinished)
        await relaunch(fixture)
        #expect(fixture.controller.phase == .ready)
        #expect(FileManager.default.contents(atPath: files.unfinished) == built)
    }

    @Test("a store file without a key file is refused before any marker is written")
    func existingStoreWithoutKeyWritesNoMarker() throws {
        let fixture = try ControllerFixture()
        let files = StoreFiles(database: fixture.storePath)
        for existing in [files.database, files.writeAheadLog] {
            _ = FileManager.default.createFile(atPath: existing, contents: Data("someone's data".utf8))
            let error = #expect(throws: SecureKeysError.self) {
                _ = try StoreCoordinator.createStoreKey(.init(path: fixture.storePath), keys: fixture.device)
            }
            #expect(error?.code == .storeExistsWithoutKey)
            #expect(!exists(files.creationMarker))
            #expect(!exists(files.key))
            try FileManager.default.removeItem(atPath: existing)
        }
    }

    @Test("a first-stage marker of a version before 0.2 (a crash between the key file and the marker naming it) finishes the creation when nothing shows the key's store existed")
    func creationInterruptedBeforeTheMarkerNamedTheKey() async throws {
        let fixture = try ControllerFixture()
        let files = try fixture.interruptCreationAfterTheKey()
        try StoreCreationMarker(stage: .makingKey).write(to: files.creationMarker, in: .real)
        await fixture.launch()
        #expect(fixture.controller.phase == .ready)
        #expect(!exists(files.creationMarker))
        try await fixture.controller.coordinator?.put("k", "v")
        #expect(try await fixture.value("k") == "v")
    }
}

/// The creation's folder syncs, and the crash points the ones it leaves out open (keys/README.md, "The
/// creation, step by step"), on a simulated disk. Not on the main actor: the fixture is used from one task.
@Suite("Store creation: folder syncs", .timeLimit(.minutes(3)))
struct StoreCreationSyncTests {
    func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Attaches the fixture's store through a power cut at the `failingCall`-th call of `kind`, which must fail
    /// the attach with a typed error, and returns the plan that cut it.
    func attachThroughPowerCut(_ fixture: FaultFixture, at failingCall: Int, of kind: DiskFaultPlan.Call) async throws -> DiskFaultPlan {
        let plan = try fixture.fileSystem.armFaultPlan(
            under: fixture.diskRoot, failingCall: failingCall, fault: .powerCut(.drop, seed: 1), calls: [kind])
        do {
            _ = try await StoreCoordinator.attach(fixture.configuration, keys: fixture.device!)
            Issue.record("the attach succeeded through a power cut at \(kind) \(failingCall)")
        } catch {
            #expect(IOFaultSweepTests.isTyped(error), "\(error)")
        }
        plan.disarm()
        #expect(plan.failures.first?.call == kind)
        return plan
    }

    /// Attaches `configuration` on the fixture's disk and returns how many folder syncs the library made itself.
    ///
    /// SQLite's, when it first syncs a new journal or log, are the disk model's and not counted; no call fails.
    func attachCountingFolderSyncs(_ fixture: FaultFixture, _ configuration: StoreConfiguration) async throws -> (StoreCoordinator, Int) {
        let plan = try fixture.fileSystem.armFaultPlan(under: fixture.diskRoot, failingCall: Int.max, fault: .ioError, calls: [.syncDirectory])
        defer { plan.disarm() }
        let coordinator = try await StoreCoordinator.attach(configuration, keys: fixture.device!)
        return (coordinator, plan.callsSeen)
    }

    @Test("a new store's creation and first attach sync its folder four times — the marker, the key file, the built store with its log, the inbox key file with the marker's removal — SQLite's journal and log none, and leave no entry change unsynced, whether commits sync the log (FULL) or not (NORMAL)", arguments: [Database.Configuration.Synchronous.full, .normal])
    func creationSyncsTheFolderFourTimes(synchronous: Database.Configuration.Synchronous) async throws {
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        var configuration = fixture.configuration
        configuration.database.synchronous = synchronous
        let (coordinator, folderSyncs) = try await attachCountingFolderSyncs(fixture, configuration)
        #expect(folderSyncs == 4)
        #expect(fixture.disk.unsyncedChanges.entryChanges == 0)
        await coordinator.close()
    }

    @Test("a new store whose migration fails is not there: its build stays beside the marker, nothing is acknowledged; after a power cut, the next attach builds the store with migrations that succeed")
    func failedMigrationLeavesNoStore() async throws {
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        let files = fixture.configuration.files
        struct Refused: Error {}
        var refusing = fixture.configuration
        var migrator = DatabaseMigrator()
        migrator.registerMigration(DatabaseMigrator.keyValueMigrationIdentifier) { _ in throw Refused() }
        refusing.migrator = migrator
        do {
            _ = try await StoreCoordinator.attach(refusing, keys: fixture.device!)
            Issue.record("the attach succeeded through a failed migration")
        } catch {
            #expect((error as? StoreError)?.code == .migrationFailed, "\(error)")
        }
        #expect(try StoreCreationMarker.read(at: files.creationMarker)?.stage == .building)
        #expect(!exists(files.inboxKey))
        try fixture.reboot(cut: true)
        #expect(try StoreCreationMarker.read(at: files.creationMarker)?.stage == .building)
        try fixture.unlock()
        try await fixture.withStore { coordinator in
            #expect(!exists(files.creationMarker))
            #expect(exists(files.inboxKey))
            #expect(fixture.disk.unsyncedChanges.entryChanges == 0)
            try await fixture.put("k", "v", in: coordinator)
        }
        try await fixture.withStore { coordinator in
            let lost = try await fixture.lost(in: coordinator)
            #expect(lost.isEmpty)
        }
    }

    @Test("a power cut at each sync of the store's building — before it is durable — leaves the marker and what the model kept of the build; the next launch builds the store again and keeps every write after")
    func powerCutWhileTheStoreIsBuilt() async throws {
        // The syncs: the marker's, the key file's, then the build's (SQLite's, at the switch to WAL); the power
        // goes just before the build's, and just before the folder sync that follows it.
        for (call, kind) in [(3, DiskFaultPlan.Call.sync), (3, .syncDirectory)] {
            let fixture = FaultFixture()
            try fixture.setUpDevice()
            let files = fixture.configuration.files
            _ = try await attachThroughPowerCut(fixture, at: call, of: kind)
            try fixture.reboot(cut: false)
            #expect(try StoreCreationMarker.read(at: files.creationMarker)?.stage == .building, "\(kind)")
            try fixture.unlock()
            try await fixture.withStore { try await fixture.put("k", "v", in: $0) }
            #expect(!exists(files.creationMarker))
            try await fixture.withStore { coordinator in
                let lost = try await fixture.lost(in: coordinator)
                #expect(lost.isEmpty)
            }
        }
    }

    @Test("a power cut after the marker's removal, before the folder's next sync, may bring the marker back beside the built store, in which nothing was acknowledged: the next attach moves it aside, builds the store again and removes the marker")
    func powerCutBeforeTheMarkerRemovalIsDurable() async throws {
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        let files = fixture.configuration.files
        // The power goes just before the second link: the inbox key file's, after the store was built and made
        // durable and the marker was removed.
        let plan = try await attachThroughPowerCut(fixture, at: 2, of: .link)
        #expect(plan.failures.first?.path.hasSuffix(".inbox-key") == true)
        try fixture.reboot(cut: false)
        #expect(try StoreCreationMarker.read(at: files.creationMarker)?.stage == .building)
        #expect(!exists(files.inboxKey))
        try fixture.unlock()
        try await fixture.withStore { try await fixture.put("k", "v", in: $0) }
        #expect(!exists(files.creationMarker))
        #expect(exists(files.inboxKey))
        #expect(exists(files.unfinished), "the built store, moved aside")
        try await fixture.withStore { coordinator in
            let lost = try await fixture.lost(in: coordinator)
            #expect(lost.isEmpty)
        }
    }
}

/// A key source whose creation fails and which cannot tell whether it made a key (its record throws).
private struct UncertainKeySource: StoreKeyProvider {
    struct Failure: Error {}

    func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup { .absent }
    func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes { throw Failure() }
    func storeKeyRecord(forStoreAt storePath: String) throws -> StoreKeyRecord? { throw Failure() }
}
