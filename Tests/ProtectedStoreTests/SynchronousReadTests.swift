import Foundation
import ProtectedData
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// `readNow`: the synchronous read, on the caller's thread — as GRDB's `read` — for a UI's short reads.
@Suite("Synchronous reads on the caller's thread", .serialized, .timeLimit(.minutes(3)))
@MainActor
struct SynchronousReadTests {
    /// The calling thread's kernel name: a reader's is `PStore.reader`.
    nonisolated static func threadName() -> String { StoreThreadTests.threadName() }

    /// A store on a new simulated device, its pool limited to one reader.
    static func storeWithOneReader(in directory: TemporaryDirectory) async throws -> StoreCoordinator {
        let device = try KeybagDevice.setUp(
            in: directory.path, passcode: try SecureBytes(utf8: "1234"), configuration: .init(kdf: .minimal), clock: ManualClock())
        var configuration = StoreConfiguration(path: directory.file("app.sqlite"))
        configuration.maximumReaderCount = 1
        return try await StoreCoordinator.attach(configuration, keys: device)
    }

    @Test("readNow runs its body on the calling thread, not on a reader's, and returns what it read")
    func runsOnTheCallingThread() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        try await coordinator.put("k", "v")
        let caller = pthread_self()
        let (value, ranOnCaller, name) = try fixture.controller.readNow { database in
            (try database.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'k'"),
             pthread_equal(pthread_self(), caller) != 0, Self.threadName())
        }
        #expect(value == "v")
        #expect(ranOnCaller, "the body ran on \(name)")
        #expect(name != "PStore.reader")
        // An awaited read still runs on a reader's thread.
        #expect(try await coordinator.read { _ in Self.threadName() } == "PStore.reader")
    }

    @Test("readNow returns while a write is open, and sees the store as it was before that write")
    func doesNotWaitForAWrite() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        try await coordinator.put("k", "before")
        let writing = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let write = Task.detached {
            try await coordinator.write { database in
                try database.execute("UPDATE entries SET value = 'during' WHERE key = 'k'")
                writing.signal()
                _ = release.wait(timeout: .now() + 60)  // a hang guard, not a measurement
            }
        }
        await Task.detached { _ = writing.wait(timeout: .now() + 60) }.value
        let seen = try coordinator.readNow { try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'k'") }
        release.signal()
        try await write.value
        #expect(seen == "before")
        #expect(try coordinator.readNow { try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'k'") } == "during")
    }

    @Test("with every reader busy, readNow waits for the first one returned, then runs on it; no reader is opened past the limit")
    func waitsForABusyReader() async throws {
        let directory = TemporaryDirectory()
        let coordinator = try await Self.storeWithOneReader(in: directory)
        try await coordinator.put("k", "v")
        let reading = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let busy = Task.detached {
            try await coordinator.read { database in
                reading.signal()
                _ = release.wait(timeout: .now() + 60)
                return try database.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'k'")
            }
        }
        await Task.detached { _ = reading.wait(timeout: .now() + 60) }.value
        let waited = Task.detached { try coordinator.readNow { try $0.fetchValue(String.self, "SELECT value FROM entries WHERE key = 'k'") } }
        try await Task.sleep(for: .milliseconds(100))
        #expect(coordinator.openReaderCount == 1, "no second reader past maximumReaderCount")
        release.signal()
        #expect(try await busy.value == "v")
        #expect(try await waited.value == "v")
        #expect(coordinator.openReaderCount == 1)
        await coordinator.close()
    }

    @Test("a readNow blocked on a busy reader is woken by the close and throws its error")
    func closeWakesABlockedRead() async throws {
        let directory = TemporaryDirectory()
        let coordinator = try await Self.storeWithOneReader(in: directory)
        let reading = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let busy = Task.detached {
            try await coordinator.read { _ in
                reading.signal()
                _ = release.wait(timeout: .now() + 60)
            }
        }
        await Task.detached { _ = reading.wait(timeout: .now() + 60) }.value
        let waited = Task.detached { try coordinator.readNow { _ in 1 } }
        try await Task.sleep(for: .milliseconds(100))
        let closing = Task.detached { await coordinator.close() }
        let error = await #expect(throws: StoreError.self) { try await waited.value }
        #expect(error?.code == .closed)
        release.signal()
        try await busy.value
        await closing.value
    }

    @Test("the controller's readNow does not wait: before launch misuse, while waiting for protected data protected-data-unavailable, after terminate terminated")
    func controllerReadNowDoesNotWait() async throws {
        let fixture = try ControllerFixture()
        let before = #expect(throws: StoreError.self) { try fixture.controller.readNow { _ in 1 } }
        #expect(before?.code == .misuse)
        await fixture.launch()
        try await fixture.controller.coordinator?.put("k", "v")
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        #expect(fixture.controller.phase == .waitingForProtectedData)
        let waiting = #expect(throws: StoreError.self) { try fixture.controller.readNow { _ in 1 } }
        #expect(waiting?.code == .protectedDataUnavailable)
        try await fixture.unlock()
        #expect(try fixture.controller.readNow { try $0.fetchValue(String.self, "SELECT value FROM entries") } == "v")
        await fixture.controller.terminate()
        let after = #expect(throws: StoreError.self) { try fixture.controller.readNow { _ in 1 } }
        #expect(after?.code == .terminated)
    }
}
