import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// `await controller.terminate()`: it returns once what was under way has ended and the store is closed.
@MainActor
@Suite struct TerminateTests {
    @Test("terminate returns with the store closed and its WAL checkpointed away, even with a write in flight")
    func terminateReturnsWithTheStoreClosed() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)
        // A write that is running when terminate is called: it runs to its end, then the store closes.
        let (started, start) = AsyncStream.makeStream(of: Void.self)
        let writing = try fixture.controller.submit("long write") { coordinator in
            start.yield()
            try await coordinator.write { db in
                for index in 0..<2_000 { try db.execute("INSERT INTO entries(key, value) VALUES (?, ?)", [.text("k\(index)"), .text("v")]) }
            }
        }
        for await _ in started { break }
        await fixture.controller.terminate()
        #expect(writing.outcome?.word == "completed")
        #expect(!(await coordinator.isOpen))
        // Closing the last connection checkpoints the WAL into the store and removes it.
        #expect(!FileManager.default.fileExists(atPath: fixture.storePath + "-wal"))
        #expect(fixture.controller.phase == .terminated)
    }

    @Test("terminate during an attach returns after the attached store was closed again")
    func terminateDuringAttach() async throws {
        let fixture = try ControllerFixture()
        fixture.controller.launch()  // the device is unlocked: the attach starts now, off the main actor
        await fixture.controller.terminate()
        #expect(fixture.controller.coordinator == nil)
        // The attach created and opened the store; terminate waited for it and closed it again.
        #expect(FileManager.default.fileExists(atPath: fixture.storePath))
        #expect(!FileManager.default.fileExists(atPath: fixture.storePath + "-wal"), "the store is still open")
    }

    @Test("at terminate, a waiting perform and a waiting read both fail with terminated")
    func performAndReadSayTerminated() async throws {
        let fixture = try ControllerFixture()
        try await fixture.rebootDevice()  // locked: everything waits
        await fixture.launch()
        let perform = Task { @MainActor in try await fixture.controller.perform("waits") { _ in } }
        let read = Task { @MainActor in try await fixture.controller.read { _ in 1 } }
        while fixture.controller.queuedOperationCount == 0 { await Task.yield() }
        await fixture.controller.terminate()
        for outcome in [await perform.result.map { _ in 0 }, await read.result] {
            #expect(throws: StoreError.self) { try outcome.get() }
            #expect((outcome.failure as? StoreError)?.code == .terminated, "\(String(describing: outcome.failure))")
        }
    }

    @Test("terminating twice waits the same way and changes nothing")
    func terminateTwice() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        await fixture.controller.terminate()
        await fixture.controller.terminate()
        #expect(fixture.controller.phase == .terminated)
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
