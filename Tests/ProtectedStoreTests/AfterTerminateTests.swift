import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// After `terminate()` the controller starts nothing, by one rule: every call that could start work throws
/// `terminated`; a coordinator kept from before throws `closed`.
@MainActor
@Suite struct AfterTerminateTests {
    /// A controller that was ready, then terminated; and the coordinator it had.
    private func terminated() async throws -> (ControllerFixture, StoreCoordinator) {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        await fixture.controller.terminate()
        return (fixture, coordinator)
    }

    private func code(_ body: () async throws -> Void) async -> StoreError.Code? {
        do {
            try await body()
            return nil
        } catch {
            return (error as? StoreError)?.code
        }
    }

    @Test("perform after terminate throws terminated and never runs its body")
    func performAfterTerminate() async throws {
        let (fixture, _) = try await terminated()
        var ran = false
        #expect(await code { try await fixture.controller.perform("late") { _ in ran = true } } == .terminated)
        #expect(!ran)
    }

    @Test("read after terminate throws terminated")
    func readAfterTerminate() async throws {
        let (fixture, _) = try await terminated()
        #expect(await code { _ = try await fixture.controller.read { _ in 1 } } == .terminated)
    }

    @Test("submit after terminate throws terminated and queues nothing")
    func submitAfterTerminate() async throws {
        let (fixture, _) = try await terminated()
        #expect(await code { try fixture.controller.submit("late") { _ in } } == .terminated)
        #expect(fixture.controller.queuedOperationCount == 0)
    }

    @Test("appendToInbox after terminate throws terminated and writes nothing")
    func appendAfterTerminate() async throws {
        let (fixture, _) = try await terminated()
        let inboxPath = fixture.controller.configuration.store.files.inbox
        let before = fileBytes(inboxPath)
        #expect(await code { try fixture.controller.appendToInbox(.put(key: "k", value: "v")) } == .terminated)
        #expect(fileBytes(inboxPath) == before)
    }

    @Test("retrying quarantined inbox records after terminate throws terminated")
    func retryAfterTerminate() async throws {
        let (fixture, _) = try await terminated()
        #expect(await code { try await fixture.controller.retryQuarantinedInboxRecords() } == .terminated)
    }

    @Test("values(tracking:) after terminate ends at once by throwing terminated")
    func valuesAfterTerminate() async throws {
        let (fixture, _) = try await terminated()
        let values = fixture.controller.values(tracking: { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") })
        #expect(await code { for try await _ in values {} } == .terminated)
    }

    @Test("launch after terminate starts nothing: the phase stays terminated and no attach runs")
    func launchAfterTerminate() async throws {
        let fixture = try ControllerFixture()
        await fixture.controller.terminate()
        fixture.controller.launch()
        await fixture.controller.waitUntilIdle()
        #expect(fixture.controller.phase == .terminated)
        #expect(fixture.controller.coordinator == nil)
        #expect(!FileManager.default.fileExists(atPath: fixture.storePath), "an attach ran and created the store")
    }

    @Test("a coordinator kept after terminate throws closed, not protected-data-unavailable")
    func keptCoordinatorSaysClosed() async throws {
        let (_, coordinator) = try await terminated()
        #expect(await code { try await coordinator.put("k", "v") } == .closed)
        #expect(await code { _ = try await coordinator.read { _ in 1 } } == .closed)
        #expect(await code { _ = try await coordinator.mergeInbox() } == .closed)
    }

    @Test("a coordinator kept after a class-A lock closed its store throws protected-data-unavailable")
    func keptCoordinatorAfterLockSaysUnavailable() async throws {
        let fixture = try ControllerFixture(protectionClass: .complete)
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        await fixture.lock()
        await fixture.advance(.seconds(10))
        #expect(fixture.controller.coordinator == nil)
        #expect(await code { try await coordinator.put("k", "v") } == .protectedDataUnavailable)
        #expect(await code { _ = try await coordinator.read { _ in 1 } } == .protectedDataUnavailable)
        await fixture.controller.terminate()
    }

    @Test("a controller that goes away with a write in flight closes its store when the write ends: WAL checkpointed")
    func droppedControllerClosesItsStore() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        let (started, start) = AsyncStream.makeStream(of: Void.self)
        let release = DispatchSemaphore(value: 0)
        let writing = Task.detached {
            try await coordinator.write { database in
                start.yield()
                release.wait()  // on the writer's own thread: holds the write open while the controller goes
                try database.execute("INSERT INTO entries(key, value) VALUES ('in-flight', 'v')")
            }
        }
        for await _ in started { break }
        weak let old = fixture.controller
        fixture.controller = fixture.makeController()  // the last reference to the launched controller
        #expect(old == nil, "something else still holds the controller")
        release.signal()
        try await writing.value
        // The close comes after the write: poll, since nothing can await a controller that is gone.
        var open = true
        for _ in 0..<500 where open {
            open = await coordinator.isOpen
            if open { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(!open, "the store is still open 5 s after its controller went away")
        await coordinator.waitUntilThreadsStopped()
        #expect(!FileManager.default.fileExists(atPath: fixture.storePath + "-wal"), "the write-ahead log was not checkpointed")
        #expect(await code { try await coordinator.put("k", "v") } == .closed)
        // The write in flight is durable.
        await fixture.launch()
        #expect(try await fixture.value("in-flight") == "v")
        await fixture.controller.terminate()
    }
}
