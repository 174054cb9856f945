import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore
import StoreConcurrency

/// Database work runs on threads the store owns, never on Swift's cooperative pool (issue 27, item 6).
@Suite("The store's own threads", .timeLimit(.minutes(3)))
@MainActor
struct StoreThreadTests {
    /// The calling thread's name, as the kernel knows it (`/proc/thread-self/comm`).
    nonisolated static func threadName() -> String {
        let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "?"
        return comm.trimmingCharacters(in: .newlines)
    }

    /// The calling thread's kernel id, from `/proc/thread-self` (`<pid>/task/<tid>`).
    nonisolated static func threadID() -> String {
        let link = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")) ?? "?"
        return String(link.split(separator: "/").last ?? "?")
    }

    /// Whether the thread `id` of this process still exists.
    func threadExists(_ id: String) -> Bool {
        FileManager.default.fileExists(atPath: "/proc/self/task/\(id)")
    }

    /// Whether thread `id` is gone, allowing the kernel up to 2 s to drop its `/proc` entry: `pthread_join` returns
    /// once the thread has exited (the kernel clears its id), which can come just before the entry is removed — an
    /// AddressSanitizer run saw a joined writer's entry still there once.
    func threadEnded(_ id: String) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(2)
        while threadExists(id) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    @Test("the attach, a write and a read run their SQLite work on the store's own named threads")
    func sqliteWorkRunsOnTheStoresThreads() async throws {
        let fixture = try ControllerFixture()
        let migrationThread = LockedState("")
        fixture.migrator.registerMigration("notes the thread it runs on") { _ in
            migrationThread.withLock { $0 = StoreThreadTests.threadName() }
        }
        fixture.controller = fixture.makeController()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        let writer = try await coordinator.write { _ in StoreThreadTests.threadName() }
        let reader = try await coordinator.read { _ in StoreThreadTests.threadName() }
        let controllerReader = try await fixture.controller.read { _ in StoreThreadTests.threadName() }
        let performed = try await fixture.controller.perform("write") { coordinator in
            try await coordinator.write { _ in StoreThreadTests.threadName() }
        }
        #expect(migrationThread.withLock { $0 } == "PStore.writer")
        #expect(writer == "PStore.writer")
        #expect(performed == "PStore.writer")
        #expect(reader == "PStore.reader")
        #expect(controllerReader == "PStore.reader")
        await fixture.controller.terminate()
    }

    @Test("a one-row read returns while long writes on as many stores as the pool has threads block")
    func readReturnsWhileWritesBlockOnOtherStores() async throws {
        // As many blocked writes as Swift's cooperative pool has threads (2 on a 2-core machine): on the pool,
        // they would hold every one of its threads, and the read below could not run until one ended.
        let writing = max(2, ProcessInfo.processInfo.activeProcessorCount)
        var fixtures: [ControllerFixture] = []
        for _ in 0...writing {
            let fixture = try ControllerFixture()
            await fixture.launch()
            try await fixture.controller.coordinator?.put("k", "v")
            fixtures.append(fixture)
        }
        let release = DispatchSemaphore(value: 0)
        let (started, start) = AsyncStream.makeStream(of: Void.self)
        var writes: [Task<DispatchTimeoutResult, any Error>] = []
        for fixture in fixtures.prefix(writing) {
            let coordinator = try #require(fixture.controller.coordinator)
            writes.append(Task.detached {
                try await coordinator.write { database in
                    try database.execute("INSERT INTO entries(key, value) VALUES ('during', 'the write')")
                    start.yield()
                    // Blocks its thread until the reads below returned (30 s: a hang guard, not a measurement).
                    return release.wait(timeout: .now() + 30)
                }
            })
        }
        var count = 0
        for await _ in started {
            count += 1
            if count == writing { break }
        }
        // A read of a store whose writer blocks, and of a store nobody writes.
        let sameStore = try await fixtures[0].controller.coordinator?.value(forKey: "k")
        let otherStore = try await fixtures[writing].controller.read {
            try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'k'")
        }
        for _ in 0..<writing { release.signal() }
        for write in writes {
            #expect(try await write.value == .success, "the write was released by its time-out: the read waited for it")
        }
        #expect(sameStore == "v")
        #expect(otherStore == "v")
        for fixture in fixtures { await fixture.controller.terminate() }
    }

    @Test("the writer's and the readers' threads end when terminate returns")
    func threadsEndAtTerminate() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        let writer = try await coordinator.write { _ in StoreThreadTests.threadID() }
        let readers = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<8 { group.addTask { try await coordinator.read { _ in StoreThreadTests.threadID() } } }
            var readers: Set<String> = []
            for try await reader in group { readers.insert(reader) }
            return readers
        }
        #expect(threadExists(writer))
        await fixture.controller.terminate()
        #expect(await threadEnded(writer), "the writer's thread \(writer) still runs")
        for reader in readers { #expect(await threadEnded(reader), "a reader's thread \(reader) still runs") }
        // A call on the closed store still runs (on a short-lived thread), fails, and leaves no thread behind.
        await #expect(throws: StoreError.self) { try await coordinator.put("k", "v") }
        await coordinator.waitUntilThreadsStopped()
        #expect(!(await coordinator.isOpen))
    }

    @Test("at the class-A lock the store's threads end with the store")
    func threadsEndAtClassALock() async throws {
        let fixture = try ControllerFixture(protectionClass: .complete)
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        let writer = try await coordinator.write { _ in StoreThreadTests.threadID() }
        let reader = try await coordinator.read { _ in StoreThreadTests.threadID() }
        await fixture.lock()
        await fixture.advance(.seconds(10))
        #expect(fixture.controller.coordinator == nil)
        #expect(await threadEnded(writer))
        #expect(await threadEnded(reader))
        await fixture.controller.terminate()
    }

    @Test("a reader is opened when the store attaches, so the first read does not open one")
    func firstReaderOpensAtAttach() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        // It opens in the background; this waits for it (30 s: a hang guard, not a measurement).
        let deadline = ContinuousClock.now + .seconds(30)
        while coordinator.openReaderCount == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        #expect(coordinator.openReaderCount == 1, "no reader was opened at attach")
        #expect(try await coordinator.value(forKey: "k") == nil)
        #expect(coordinator.openReaderCount == 1, "the first read used the reader opened at attach")
        await fixture.controller.terminate()
    }
}
