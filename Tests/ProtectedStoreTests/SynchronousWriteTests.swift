import Foundation
import ProtectedData
import SecureKeys
import StoreConcurrency
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// `writeNow`: the synchronous write, on the caller's thread — as GRDB's `DatabaseQueue.write` — for a UI's short
/// writes.
@Suite("Synchronous writes on the caller's thread", .serialized, .timeLimit(.minutes(3)))
@MainActor
struct SynchronousWriteTests {
    /// The calling thread's kernel name: the writer's is `PStore.writer`.
    nonisolated static func threadName() -> String { StoreThreadTests.threadName() }

    /// A test's own error, which `writeNow` must pass on unchanged.
    struct BodyFailed: Error, Equatable {}

    /// The code of the `StoreError` that `body` throws, `nil` when it throws none (another error fails the test).
    nonisolated static func code(sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void) -> StoreError.Code? {
        thrownError(StoreError.self, sourceLocation: sourceLocation, by: body)?.code
    }

    /// Runs `body` on `count` threads of their own (not the cooperative pool's), and returns once all have ended.
    nonisolated static func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) async {
        let group = DispatchGroup()
        for index in 0..<count {
            group.enter()
            Thread {
                body(index)
                group.leave()
            }.start()
        }
        await Task.detached { group.wait() }.value
    }

    @Test("writeNow runs its body on the calling thread, not on the writer's, and commits durably: a reader sees it, and so does the store after a reboot")
    func runsOnTheCallingThreadAndCommitsDurably() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let caller = pthread_self()
        let (ranOnCaller, name) = try fixture.controller.writeNow { database in
            try database.execute("INSERT INTO entries(key, value) VALUES ('k', 'v')", [DatabaseValue]())
            return (pthread_equal(pthread_self(), caller) != 0, Self.threadName())
        }
        #expect(ranOnCaller, "the body ran on \(name)")
        #expect(name != "PStore.writer")
        let coordinator = try #require(fixture.controller.coordinator)
        #expect(try await coordinator.read { try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'k'") } == "v")
        // An awaited write still runs on the writer's thread.
        #expect(try await coordinator.write { _ in Self.threadName() } == "PStore.writer")
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        try await fixture.unlock()
        #expect(try fixture.controller.readNow { try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'k'") } == "v")
    }

    @Test("a writeNow whose body throws rolls back what it wrote and throws the body's error unchanged")
    func throwingBodyRollsBack() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        #expect(throws: BodyFailed()) {
            try coordinator.writeNow { database in
                try database.execute("INSERT INTO entries(key, value) VALUES ('k', 'v')", [DatabaseValue]())
                throw BodyFailed()
            }
        }
        #expect(try coordinator.readNow { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") } == 0)
        // The connection is usable after the rollback: no transaction was left open.
        try coordinator.writeNow { try $0.execute("INSERT INTO entries(key, value) VALUES ('k', 'w')", [DatabaseValue]()) }
        #expect(try coordinator.readNow { try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'k'") } == "w")
    }

    @Test("after the store closed, writeNow throws as write does: protected-data-unavailable after a lock, closed after the app closed it")
    func closedStoreThrowsTheCloseError() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let locked = try #require(fixture.controller.coordinator)
        await fixture.lock()
        #expect(fixture.controller.coordinator == nil, "the class-A store closed at the lock")
        #expect(Self.code { try locked.writeNow { _ in } } == .protectedDataUnavailable)
        #expect(await Self.awaitedCode { try await locked.write { _ in } } == .protectedDataUnavailable)
        try await fixture.unlock()
        let closed = try #require(fixture.controller.coordinator)
        await fixture.controller.terminate()
        #expect(Self.code { try closed.writeNow { _ in } } == .closed)
        #expect(await Self.awaitedCode { try await closed.write { _ in } } == .closed)
    }

    /// `code(_:)` for an awaited body.
    static func awaitedCode(_ body: () async throws -> Void) async -> StoreError.Code? {
        do {
            try await body()
            return nil
        } catch let error as StoreError {
            return error.code
        } catch {
            return nil
        }
    }

    @Test("the controller's writeNow does not wait: before launch misuse, while waiting for protected data protected-data-unavailable, after terminate terminated")
    func controllerWriteNowDoesNotWait() async throws {
        let fixture = try ControllerFixture()
        #expect(Self.code { try fixture.controller.writeNow { _ in } } == .misuse)
        await fixture.launch()
        try fixture.controller.writeNow { try $0.execute("INSERT INTO entries(key, value) VALUES ('k', 'v')", [DatabaseValue]()) }
        await fixture.lock()
        #expect(fixture.controller.phase == .waitingForProtectedData)
        #expect(Self.code { try fixture.controller.writeNow { _ in } } == .protectedDataUnavailable)
        try await fixture.unlock()
        #expect(try fixture.controller.readNow { try $0.fetchValue(String.self, "SELECT value FROM entries") } == "v")
        await fixture.controller.terminate()
        #expect(Self.code { try fixture.controller.writeNow { _ in } } == .terminated)
    }

    @Test("writeNow from several threads and awaited writes at once commit one at a time, each exactly once: a counter each reads and increments ends at the number of writes")
    func concurrentWritesDoNotInterleave() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        try await coordinator.put("counter", "0")
        /// How many transactions are inside their body now, and the most there ever were.
        let inside = LockedState((now: 0, most: 0))
        let increment: @Sendable (Database) throws -> Void = { database in
            inside.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
            defer { inside.withLock { $0.now -= 1 } }
            let value = try #require(try database.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'counter'"))
            // Long enough for another write to come in between the read and the write, were it let in.
            usleep(200)
            try database.execute(
                "UPDATE entries SET value = ? WHERE key = 'counter'", [.text(String(try #require(Int(value)) + 1))])
        }
        let threads = 4, writesPerThread = 10, awaitedWrites = 20
        let failures = LockedState([String]())
        async let awaited: Void = {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<awaitedWrites { group.addTask { try await coordinator.write(increment) } }
                try await group.waitForAll()
            }
        }()
        await Self.onThreads(threads) { _ in
            for _ in 0..<writesPerThread {
                do {
                    try coordinator.writeNow(increment)
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        try await awaited
        #expect(failures.withLock { $0 } == [])
        #expect(inside.withLock { $0.most } == 1, "two transactions' bodies ran at once")
        let final = try coordinator.readNow { try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'counter'") }
        #expect(final == String(threads * writesPerThread + awaitedWrites))
    }

    @Test(
        "writeNow inside a write's body, or inside another writeNow's, throws misuse instead of waiting for itself, and the outer write commits",
        .timeLimit(.minutes(1)))
    func reentrantWriteNowIsMisuse() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        let insideWrite = try await coordinator.write { database in
            try database.execute("INSERT INTO entries(key, value) VALUES ('a', '1')", [DatabaseValue]())
            return Self.code { try coordinator.writeNow { _ in } }
        }
        #expect(insideWrite == .misuse)
        var message = ""
        try coordinator.writeNow { database in
            try database.execute("INSERT INTO entries(key, value) VALUES ('b', '2')", [DatabaseValue]())
            do {
                try coordinator.writeNow { _ in }
            } catch let error as StoreError where error.code == .misuse {
                message = error.message
            }
        }
        #expect(message.contains("inside another write's transaction"), "the message says why: \(message)")
        #expect(try coordinator.readNow { try $0.fetchValues(String.self, "SELECT key FROM entries ORDER BY key") } == ["a", "b"])
    }

    @Test(
        "writeNow inside an inbox handler throws misuse instead of waiting for the merge that runs the handler, and the merge goes on",
        .timeLimit(.minutes(1)))
    func writeNowInsideAnInboxHandlerIsMisuse() async throws {
        let fixture = try ControllerFixture()
        // The handler reaches the coordinator as an app's would, through something it captured.
        let captured = LockedState<StoreCoordinator?>(nil)
        // The coordinator holds the handlers, which hold `captured`: let go of it at the end, or the two keep each
        // other (LeakSanitizer reports the cycle).
        defer { captured.withLock { $0 = nil } }
        let codes = LockedState<[StoreError.Code?]>([])
        fixture.inboxHandlers = InboxHandlers().handlingKeyValue { database, change in
            if let coordinator = captured.withLock({ $0 }) {
                let code = Self.code { try coordinator.writeNow { _ in } }
                codes.withLock { $0.append(code) }
            }
            try InboxHandlers.keyValue.apply(change, to: database)
        }
        fixture.controller = fixture.makeController()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        captured.withLock { $0 = coordinator }
        // The append merges at once, on the writer, with the handler inside the merge's transaction.
        try fixture.controller.appendToInbox(.put(key: "from-the-inbox", value: "merged"))
        // A bounded wait, not `waitUntilIdle()`: a handler that waits for itself would hang the test, not fail it.
        for _ in 0..<1_000 where codes.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(10)) }
        try #require(codes.withLock { $0 } == [.misuse], "the handler's writeNow did not return within 10 s")
        await fixture.controller.waitUntilIdle()
        #expect(try coordinator.readNow { try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'from-the-inbox'") } == "merged")
    }

    @Test("an observation hears of a writeNow commit: it reads again and sees the new value")
    func observationSeesAWriteNowCommit() async throws {
        let fixture = try ControllerFixture()
        let counter = ReadCounter()
        let collector = ValueObservationTests.Collector(fixture.controller.values(tracking: ValueObservationTests.keys(counter)))
        await fixture.launch()
        await collector.wait { $0.values.count == 1 }
        #expect(collector.values == [[]])
        try fixture.controller.writeNow { try $0.execute("INSERT INTO entries(key, value) VALUES ('a', '1')", [DatabaseValue]()) }
        await collector.wait { $0.values.last == ["a"] }
        #expect(collector.values.last == ["a"])
        collector.task?.cancel()
    }

    @Test("a close waits for a writeNow in progress, which commits; a writeNow after it throws closed")
    func closeWaitsForAWriteNowInProgress() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        let writing = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let write = Task.detached {
            try coordinator.writeNow { database in
                try database.execute("INSERT INTO entries(key, value) VALUES ('k', 'v')", [DatabaseValue]())
                writing.signal()
                _ = release.wait(timeout: .now() + 60)  // a hang guard, not a measurement
            }
        }
        await Task.detached { _ = writing.wait(timeout: .now() + 60) }.value
        let closed = LockedState(false)
        let closing = Task.detached {
            await coordinator.close()
            closed.withLock { $0 = true }
        }
        try await Task.sleep(for: .milliseconds(200))
        #expect(!closed.withLock { $0 }, "the close did not wait for the write in progress")
        release.signal()
        try await write.value
        await closing.value
        #expect(Self.code { try coordinator.writeNow { _ in } } == .closed)
        await fixture.controller.terminate()
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        try await fixture.unlock()
        #expect(try fixture.controller.readNow { try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'k'") } == "v")
    }
}
