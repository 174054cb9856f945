import Foundation
import ProtectedData
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// The last reference to a coordinator, or to a controller, held by a `Task`: the ends of an app's objects.
@MainActor
@Suite struct LastReferenceTests {
    /// What a `Task` that holds the last reference to a closed coordinator calls on it.
    enum Call: CaseIterable, Sendable { case isOpen, put, write, read }

    @Test(
        "a Task that holds the last reference to a terminated store's coordinator calls it safely, 400 times under load",
        arguments: Call.allCases)
    func lastHolderCallsAClosedCoordinator(_ call: Call) async throws {
        let fixture = try ControllerFixture()
        // Two spinning threads: the race this guards against (the thread that runs the call frees the coordinator
        // while the thread that queued the call still uses it) showed in half the runs under load, rarely without.
        let load = BusyLoad(threads: 2)
        defer { load.stop() }
        for _ in 0..<400 {
            fixture.controller = fixture.makeController()
            await fixture.launch()
            let (terminated, sayTerminated) = AsyncStream.makeStream(of: Void.self)
            let task = Self.callFromLastHolder(try #require(fixture.controller.coordinator), call, after: terminated)
            await fixture.controller.terminate()
            sayTerminated.finish()
            let outcome = await task.value
            switch call {
            case .isOpen: #expect(outcome == nil)
            case .put, .write, .read: #expect(outcome == .closed, "a call after terminate throws closed, not \(String(describing: outcome))")
            }
        }
    }

    /// Calls `coordinator` from a detached task that, once this returns and the controller let go, holds its last
    /// reference. The call waits until `terminated` ends, so it meets a closed store whose threads ended.
    /// Returns the code the call threw, or `nil`.
    private nonisolated static func callFromLastHolder(
        _ coordinator: consuming StoreCoordinator, _ call: Call, after terminated: AsyncStream<Void>
    ) -> Task<StoreError.Code?, Never> {
        Task.detached { [coordinator] in
            for await _ in terminated {}
            do {
                switch call {
                case .isOpen:
                    let open = await coordinator.isOpen
                    return open ? .misuse : nil
                case .put: try await coordinator.put("k", "v")
                case .write: try await coordinator.write { try $0.execute("INSERT INTO entries(key, value) VALUES ('a', 'b')") }
                case .read: _ = try await coordinator.read { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") }
                }
                return .misuse  // a call on a closed store that succeeded
            } catch let error as StoreError {
                return error.code
            } catch {
                return .misuse
            }
        }
    }
}
