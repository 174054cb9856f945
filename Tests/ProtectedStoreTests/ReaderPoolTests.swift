import Foundation
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

@Suite("Reads beside the writer", .timeLimit(.minutes(3)))
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
        await #expect(throws: SQLiteError.self) {
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
}
