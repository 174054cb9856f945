import Foundation
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// Serialized: the first test holds a write open by blocking the writer's thread (the store's own since issue 27,
/// item 6, so it no longer holds a cooperative thread; `StoreThreadTests` shows it), and keeps the suite's
/// reader counts free of each other's reads.
@Suite("Reads beside the writer", .serialized, .timeLimit(.minutes(3)))
@MainActor
struct ReaderPoolTests {
    func readyCoordinator(_ fixture: ControllerFixture) async throws -> StoreCoordinator {
        await fixture.launch()
        return try #require(fixture.controller.coordinator)
    }

    @Test("a read returns while a long write is open, and sees the store as it was before that write")
    func readDoesNotWaitForWrite() async throws {
        let fixture = try ControllerFixture()
        let coordinator = try await readyCoordinator(fixture)
        try await coordinator.put("k", "before")
        let writing = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let write = Task.detached {
            try await coordinator.write { database in
                try database.execute("UPDATE entries SET value = 'during' WHERE key = 'k'")
                for index in 0..<5_000 {
                    try database.execute("INSERT INTO entries(key, value) VALUES (?, ?)", ["row-\(index)", "v"])
                }
                writing.signal()
                // Held open until the read below has returned (60 s: a hang guard, not a measurement).
                _ = release.wait(timeout: .now() + 60)
            }
        }
        await Task.detached { _ = writing.wait(timeout: .now() + 60) }.value
        let seen = try await coordinator.value(forKey: "k")
        let count = try await coordinator.read { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") }
        release.signal()
        try await write.value
        #expect(seen == "before", "the read saw the last committed value, not the open write's")
        #expect(count == 1)
        #expect(try await coordinator.value(forKey: "k") == "during")
        #expect(try await coordinator.read { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") } == 5_001)
    }

    @Test("reads run in parallel on at most maximumReaderCount readers, and one reader serves reads in a row")
    func readersAreBoundedAndReused() async throws {
        let fixture = try ControllerFixture()
        let coordinator = try await readyCoordinator(fixture)
        try await coordinator.put("k", "v")
        for _ in 0..<5 { _ = try await coordinator.value(forKey: "k") }
        #expect(coordinator.openReaderCount == 1, "reads in a row reuse the warm reader")
        let values = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<32 { group.addTask { try await coordinator.value(forKey: "k") } }
            var values: [String?] = []
            for try await value in group { values.append(value) }
            return values
        }
        #expect(values == Array(repeating: "v", count: 32))
        #expect((1...4).contains(coordinator.openReaderCount))
    }

    @Test("a read cannot write: the reader is read-only")
    func readersAreReadOnly() async throws {
        let fixture = try ControllerFixture()
        let coordinator = try await readyCoordinator(fixture)
        await #expect(throws: StoreError.self) {
            try await coordinator.read { try $0.execute("INSERT INTO entries(key, value) VALUES ('x', 'y')", [DatabaseValue]()) }
        }
        #expect(try await coordinator.value(forKey: "x") == nil)
    }

    @Test("at the class-A lock every reader is closed, and reads fail with protected-data-unavailable, as writes do")
    func readersCloseAtClassALock() async throws {
        let fixture = try ControllerFixture(protectionClass: .complete)
        let coordinator = try await readyCoordinator(fixture)
        try await coordinator.put("k", "v")
        _ = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<8 { group.addTask { try await coordinator.value(forKey: "k") } }
            var count = 0
            for try await _ in group { count += 1 }
            return count
        }
        #expect(coordinator.openReaderCount >= 1)
        await fixture.lock()
        await fixture.advance(.seconds(10))
        #expect(fixture.controller.coordinator == nil)
        #expect(coordinator.openReaderCount == 0)
        let readError = await #expect(throws: StoreError.self) { try await coordinator.value(forKey: "k") }
        let writeError = await #expect(throws: StoreError.self) { try await coordinator.put("k", "w") }
        #expect(readError?.code == .protectedDataUnavailable)
        #expect(writeError?.code == .protectedDataUnavailable)
        #expect(readError?.message == writeError?.message)
    }

    @Test("the controller's read waits for the deferred setup before the first unlock, then runs")
    func controllerReadWaitsForReady() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.controller.coordinator?.put("k", "v")
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        #expect(fixture.controller.phase == .waitingForProtectedData)
        let controller = fixture.controller
        let read = Task { @MainActor in try await controller.read { try $0.fetchValue(String.self, "SELECT value FROM entries") } }
        await fixture.controller.waitUntilIdle()
        try await fixture.unlock()
        #expect(try await read.value == "v")
    }

    @Test("the controller's read does not queue behind a running perform: it returns while that operation runs")
    func controllerReadDoesNotQueueBehindPerform() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let controller = fixture.controller
        let (resumed, resume) = AsyncStream.makeStream(of: Void.self)
        let (hasStarted, started) = AsyncStream.makeStream(of: Void.self)
        // An operation that runs until told to finish: the queue is busy the whole time (it suspends, so it
        // blocks no thread).
        let running = Task { @MainActor in
            try await controller.perform("import") { coordinator in
                try await coordinator.put("k", "written by the running operation")
                started.yield()
                for await _ in resumed { break }
            }
        }
        for await _ in hasStarted { break }
        let queued = try controller.submit("queued behind it") { _ in }
        let seen = try await controller.read { try $0.fetchValue(String.self, "SELECT value FROM entries") }
        #expect(seen == "written by the running operation")
        #expect(fixture.controller.queuedOperationCount == 1, "the read ran while an operation was still queued")
        resume.yield()
        try await running.value
        #expect(await queued.result().description == OperationOutcome.completed.description)
    }

    @Test("the controller's read fails with the attach's error, and with terminated after terminate")
    func controllerReadFailures() async throws {
        let fixture = try ControllerFixture()
        try Data("not a database, and not empty either: 4096 bytes of it".utf8).write(to: URL(fileURLWithPath: fixture.storePath))
        await fixture.launch()
        let failed = await #expect(throws: StoreError.self) { try await fixture.controller.read { _ in 1 } }
        #expect(failed?.code == fixture.presented.first?.code)
        await fixture.controller.terminate()
        let terminated = await #expect(throws: StoreError.self) { try await fixture.controller.read { _ in 1 } }
        #expect(terminated?.code == .terminated)
    }
}
