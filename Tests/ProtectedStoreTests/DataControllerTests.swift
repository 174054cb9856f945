import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

@MainActor
@Suite("Data controller: launch and deferred setup", .timeLimit(.minutes(3)))
struct DataControllerTests {
    @Test("the seed's scenario: a background launch before first unlock waits silently, queues UI work, and the unlock runs it in order")
    func backgroundLaunchBeforeFirstUnlock() async throws {
        let fixture = try ControllerFixture()
        // First launch on an unlocked device creates the store.
        await fixture.launch()
        try fixture.put("greeting", "hello")
        await fixture.controller.waitUntilIdle()
        #expect(fixture.ran == ["put greeting"])

        // Reboot; a location event launches the app in the background before the first unlock.
        try await fixture.rebootDevice()
        fixture.ran.removeAll()
        await fixture.launch(LaunchOptions(reason: .location))
        #expect(fixture.controller.phase == .waitingForProtectedData)
        #expect(fixture.controller.coordinator == nil)
        #expect(fixture.controller.presentedError == nil)
        #expect(fixture.presented.isEmpty)
        #expect(!fixture.controller.isInteractionEnabled)
        #expect(fixture.controller.launchOptions?.inBackground == true)

        try fixture.ui("show-map")
        try fixture.put("visit", "cafe")
        try fixture.ui("refresh-list")
        await fixture.controller.waitUntilIdle()
        #expect(fixture.controller.queuedOperationCount == 3)
        #expect(fixture.ran.isEmpty)

        try await fixture.unlock()
        #expect(fixture.controller.phase == .ready)
        #expect(fixture.controller.coordinator != nil)
        #expect(fixture.controller.isInteractionEnabled)
        #expect(fixture.ran == ["show-map", "put visit", "refresh-list"])
        #expect(fixture.controller.queuedOperationCount == 0)
        #expect(try await fixture.value("greeting") == "hello")
        #expect(try await fixture.value("visit") == "cafe")
        #expect(fixture.presented.isEmpty)
    }

    @Test("regression: a failed attach never leaves a coordinator behind, and the next attach builds one afresh")
    func failedAttachLeavesNoCoordinator() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let first = try #require(fixture.controller.coordinator)
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .remoteNotification))
        #expect(fixture.controller.coordinator == nil)
        try await fixture.unlock()
        let second = try #require(fixture.controller.coordinator)
        #expect(second !== first)
        #expect(await second.isOpen)
    }

    @Test("phase 1 returns before the store attaches; with an attach that takes 2 s the store is 'launching' until the clock passes it")
    func twoPhaseLaunch() async throws {
        let fixture = try ControllerFixture(attachDelay: .seconds(2))
        fixture.controller.launch()
        #expect(fixture.controller.phase == .launching)
        #expect(fixture.controller.coordinator == nil)
        await fixture.controller.waitUntilIdle()
        #expect(fixture.controller.phase == .launching)
        try fixture.ui("first-screen")
        await fixture.advance(.milliseconds(1999))
        #expect(fixture.controller.phase == .launching)
        #expect(fixture.ran.isEmpty)
        await fixture.advance(.milliseconds(1))
        #expect(fixture.controller.phase == .ready)
        #expect(fixture.ran == ["first-screen"])
    }

    @Test("an unlock that arrives while the attach runs is not missed")
    func unlockDuringAttach() async throws {
        let fixture = try ControllerFixture(attachDelay: .seconds(1))
        await fixture.launch()
        try await fixture.rebootDevice()
        fixture.controller.launch(LaunchOptions(reason: .backgroundFetch))
        try await fixture.unlock()  // the attach already read "locked"; its result is held for 1 s
        await fixture.advance(.seconds(1))
        await fixture.advance(.seconds(1))
        #expect(fixture.controller.phase == .ready)
        #expect(fixture.controller.coordinator != nil)
    }

    @Test("lock during a write: the write finishes and is durable, the class-A store closes, later work queues until unlock")
    func lockDuringWrite() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let write = try fixture.put("draft", "v1")
        fixture.device.lock()  // the write is already queued on the store's executor
        await fixture.controller.waitUntilIdle()
        #expect(await write.result().word == "completed")
        #expect(fixture.controller.phase == .waitingForProtectedData)
        #expect(fixture.controller.coordinator == nil)
        #expect(!fixture.controller.isInteractionEnabled)
        try fixture.put("draft", "v2")
        await fixture.advance(.seconds(10))
        #expect(fixture.controller.queuedOperationCount == 1)
        try await fixture.unlock()
        #expect(fixture.ran == ["put draft", "put draft"])
        #expect(try await fixture.value("draft") == "v2")
    }

    @Test("a class-B store opened before the lock stays usable after the grace period; so does class C")
    func classBAndCStayOpen() async throws {
        for protectionClass in [ProtectionClass.completeUnlessOpen, .completeUntilFirstUserAuthentication] {
            let fixture = try ControllerFixture(protectionClass: protectionClass)
            await fixture.launch()
            await fixture.lock()
            await fixture.advance(.seconds(60))
            #expect(!fixture.device.isProtectedDataAvailable(for: .complete))
            #expect(fixture.controller.phase == .ready, "\(protectionClass)")
            try fixture.put("k", "v")
            await fixture.controller.waitUntilIdle()
            #expect(fixture.ran == ["put k"], "\(protectionClass)")
        }
    }

    @Test("a damaged store: the error is presented once, queued work fails with it, the file is untouched, and nothing retries")
    func damagedStorePresentedOnce() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try fixture.put("k", "v")
        await fixture.controller.waitUntilIdle()
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        fixture.ran.removeAll()
        var bytes = fileBytes(fixture.storePath)
        bytes[100] ^= 0xff  // page 1: fails its HMAC
        _ = FileManager.default.createFile(atPath: fixture.storePath, contents: Data(bytes))

        fixture.controller = fixture.makeController()
        let queued = try fixture.ui("early")
        await fixture.launch()
        #expect(fixture.controller.phase.name == "failed")
        #expect(fixture.presented.map(\.code.name) == ["store-damaged"])
        #expect(fixture.controller.presentedError?.code.name == "store-damaged")
        #expect(fixture.controller.coordinator == nil)
        #expect(queued.outcome?.word == "failed(store-damaged)")
        let late = try fixture.ui("late")
        #expect(late.outcome?.word == "failed(store-damaged)")
        await fixture.lock()
        try await fixture.unlock()
        #expect(fixture.presented.count == 1)
        #expect(fixture.ran.isEmpty)
        #expect(fileBytes(fixture.storePath) == bytes)
    }

    @Test("a key file whose store creation was interrupted (its marker names the key file) finishes the creation; without the marker the store is lost and nothing is created")
    func interruptedCreationAndLostStore() async throws {
        let interrupted = try ControllerFixture()
        // The creation's first half, as a crash after the key file was made leaves it.
        let key = try StoreCoordinator.createStoreKey(.init(path: interrupted.storePath), keys: interrupted.device).key
        key.wipe()
        #expect(FileManager.default.fileExists(atPath: interrupted.storePath + ".creating"))
        await interrupted.launch()
        #expect(interrupted.controller.phase == .ready)
        #expect(!FileManager.default.fileExists(atPath: interrupted.storePath + ".creating"), "the marker is removed once the store exists")

        let lost = try ControllerFixture()
        let lostKey = try lost.device.createStoreKey(forStoreAt: lost.storePath, protectionClass: .complete)
        lostKey.wipe()
        await lost.launch()
        #expect(lost.controller.phase.name == "failed")
        #expect(lost.presented.map(\.code.name) == ["store-unavailable"])
        #expect(!FileManager.default.fileExists(atPath: lost.storePath), "no empty store in place of a lost one")
    }

    @Test("a store file without its key file is reported, never given a new key")
    func storeWithoutKeyFile() async throws {
        let fixture = try ControllerFixture()
        _ = FileManager.default.createFile(atPath: fixture.storePath, contents: Data("someone's data".utf8))
        await fixture.launch()
        #expect(fixture.presented.map(\.code.name) == ["store-exists-without-key"])
        #expect(!FileManager.default.fileExists(atPath: fixture.storePath + ".key"))
        #expect(fileBytes(fixture.storePath) == Array("someone's data".utf8))
    }

    @Test("a full queue refuses the next operation with queue-full; the queued ones all run later")
    func queueOverflow() async throws {
        let fixture = try ControllerFixture(queueCapacity: 2)
        await fixture.launch()
        try await fixture.rebootDevice()
        await fixture.launch()
        try fixture.ui("one")
        try fixture.ui("two")
        let full = #expect(throws: StoreError.self) { try fixture.ui("three") }
        #expect(full?.code == .queueFull)
        try await fixture.unlock()
        #expect(fixture.ran == ["one", "two"])
    }

    @Test("a cancelled operation never runs and is reported cancelled; an expired one is reported expired")
    func cancellationAndDeadlines() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.rebootDevice()
        await fixture.launch()
        let cancelled = try fixture.ui("cancelled")
        let expiring = try fixture.ui("expiring", deadline: .seconds(5))
        let patient = try fixture.ui("patient", deadline: .seconds(60))
        #expect(fixture.controller.cancel(cancelled))
        #expect(!fixture.controller.cancel(cancelled))
        await fixture.advance(.seconds(5))
        #expect(expiring.outcome?.word == "expired")
        try await fixture.unlock()
        #expect(fixture.ran == ["patient"])
        #expect(cancelled.outcome?.word == "cancelled")
        #expect(patient.outcome?.word == "completed")
    }

    @Test("perform runs at once when ready and waits when not; terminate cancels what waits")
    func performAndTerminate() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        #expect(try await fixture.controller.perform("count") { try await $0.allEntries().count } == 0)
        try await fixture.rebootDevice()
        await fixture.launch()
        let waiting = try fixture.ui("never")
        await fixture.controller.terminate()
        #expect(waiting.outcome?.word == "cancelled")
        #expect(fixture.ran.isEmpty)
    }

    @Test("a crashed app (abandoned) leaves its store as a killed process does: open, not checkpointed, its WAL in place")
    func abandonedAppKeepsItsStoreOpen() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try fixture.put("k", "v")
        await fixture.controller.waitUntilIdle()
        #expect(FileManager.default.fileExists(atPath: fixture.storePath + "-wal"))
        fixture.controller.abandon()
        await fixture.controller.waitUntilIdle()
        #expect(fixture.controller.coordinator == nil)
        #expect(fixture.controller.phase == .terminated)
        // Closing the last connection would checkpoint the WAL into the store and delete it.
        #expect(FileManager.default.fileExists(atPath: fixture.storePath + "-wal"), "the store was closed as if the app had exited")
    }
}
