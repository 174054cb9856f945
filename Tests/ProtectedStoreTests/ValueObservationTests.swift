import Foundation
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore
import StoreConcurrency

/// Counts how often an observed read ran (reads run on a reader, off the main actor).
final class ReadCounter: Sendable {
    private let count = LockedState(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

@Suite("Observing values", .timeLimit(.minutes(3)))
@MainActor
struct ValueObservationTests {
    /// The fixture's store with a second table that observations of `entries` must ignore.
    func fixture(_ protectionClass: ProtectionClass = .complete) throws -> ControllerFixture {
        let fixture = try ControllerFixture(protectionClass: protectionClass)
        var migrator = DatabaseMigrator.keyValue
        migrator.registerMigration("other") { try $0.execute("CREATE TABLE other(x)") }
        fixture.migrator = migrator
        fixture.controller = fixture.makeController()
        return fixture
    }

    /// Collects what an observation yields, on the main actor.
    @MainActor
    final class Collector {
        var values: [[String]] = []
        var failure: (any Error)?
        var finished = false
        var task: Task<Void, Never>?

        init(_ stream: AsyncThrowingStream<[String], any Error>) {
            task = Task { @MainActor in  // strong: the task ends when the stream does (cancelled at the end of a test)
                do {
                    for try await value in stream { values.append(value) }
                } catch {
                    failure = error
                }
                finished = true
            }
        }

        /// Waits until `condition` holds (10 s at most: a hang guard, not a measurement).
        func wait(until condition: @MainActor (Collector) -> Bool) async {
            for _ in 0..<1_000 where !condition(self) { try? await Task.sleep(for: .milliseconds(10)) }
        }
    }

    static func keys(_ counter: ReadCounter) -> @Sendable (Database) throws -> [String] {
        { database in
            counter.increment()
            return try database.fetchValues(String.self, "SELECT key FROM entries ORDER BY key")
        }
    }

    @Test("the first value comes at ready; each commit to a read table gives a new one; commits elsewhere re-run nothing")
    func valuesFollowCommits() async throws {
        let fixture = try fixture()
        let counter = ReadCounter()
        let collector = Collector(fixture.controller.values(tracking: Self.keys(counter)))
        await fixture.launch()
        await collector.wait { $0.values.count == 1 }
        #expect(collector.values == [[]])
        let coordinator = try #require(fixture.controller.coordinator)
        try await coordinator.put("a", "1")
        await collector.wait { $0.values.last == ["a"] }
        try await coordinator.write { try $0.execute("INSERT INTO other(x) VALUES (1)", [DatabaseValue]()) }
        // Time for a wrong re-read to happen (it would show in the count); none must.
        try await Task.sleep(for: .milliseconds(200))
        try await coordinator.put("b", "2")
        await collector.wait { $0.values.last == ["a", "b"] }
        #expect(collector.values.last == ["a", "b"])
        #expect(counter.value == 3, "one read at ready and one per commit to `entries`; the write to `other` re-ran none")
        collector.task?.cancel()
    }

    @Test("an inbox merge is a commit like any other: the observation sees the merged record")
    func observationSeesInboxMerge() async throws {
        let fixture = try fixture()
        let collector = Collector(fixture.controller.values(tracking: Self.keys(ReadCounter())))
        await fixture.launch()
        await collector.wait { $0.values.count == 1 }
        try fixture.controller.appendToInbox(.put(key: "from-inbox", value: "1"))
        await fixture.controller.waitUntilIdle()
        await collector.wait { $0.values.last == ["from-inbox"] }
        #expect(collector.values.last == ["from-inbox"])
        collector.task?.cancel()
    }

    @Test("while the store is locked away the observation is silent, not failed, and resumes with a fresh value at ready")
    func silentWhileLockedResumesAtReady() async throws {
        let fixture = try fixture(.complete)
        let collector = Collector(fixture.controller.values(tracking: Self.keys(ReadCounter())))
        await fixture.launch()
        await collector.wait { $0.values.count == 1 }
        await fixture.lock()
        await fixture.advance(.seconds(10))
        #expect(fixture.controller.coordinator == nil)
        try fixture.controller.appendToInbox(.put(key: "written-while-locked", value: "1"))
        try await Task.sleep(for: .milliseconds(100))
        #expect(collector.failure == nil)
        #expect(!collector.finished)
        #expect(collector.values == [[]])
        try await fixture.unlock()
        await collector.wait { $0.values.last == ["written-while-locked"] }
        #expect(collector.values.last == ["written-while-locked"])
        #expect(collector.failure == nil)
        collector.task?.cancel()
    }

    @Test("a read that fails ends the sequence with its error; terminating the controller ends it quietly")
    func failuresAndTermination() async throws {
        let fixture = try fixture()
        await fixture.launch()
        let failing = Collector(fixture.controller.values(tracking: { database in
            try database.fetchValues(String.self, "SELECT key FROM no_such_table")
        }))
        await failing.wait { $0.finished }
        #expect((failing.failure as? StoreError)?.message.contains("no_such_table") == true)

        let quiet = Collector(fixture.controller.values(tracking: Self.keys(ReadCounter())))
        await quiet.wait { $0.values.count == 1 }
        await fixture.controller.terminate()
        await quiet.wait { $0.finished }
        #expect(quiet.finished && quiet.failure == nil)
    }
}
