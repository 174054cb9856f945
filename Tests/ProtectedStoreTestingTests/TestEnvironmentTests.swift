import ProtectedStore
import ProtectedStoreTesting
import Testing

/// What an app developer's tests look like with ProtectedStoreTesting.
@MainActor
@Suite("ProtectedStoreTesting", .timeLimit(.minutes(3)))
struct TestEnvironmentTests {
    @Test("a save submitted during a background launch before first unlock runs after the unlock")
    func queuedSaveRunsAfterUnlock() async throws {
        let environment = try ProtectedStoreTestEnvironment()
        _ = await environment.launch()  // creates the store
        try await environment.reboot()
        let controller = await environment.launch(LaunchOptions(reason: .location))
        #expect(controller.phase == .waitingForProtectedData)
        try controller.submit("save") { try await $0.put("k", "v") }
        #expect(controller.queuedOperationNames == ["save"])
        try await environment.unlock()
        #expect(controller.phase == .ready)
        #expect(controller.queuedOperationCount == 0)
        #expect(try await controller.perform("read") { try await $0.value(forKey: "k") } == "v")
    }

    @Test("the grace period passes on the test clock, and a crash leaves acknowledged writes in place")
    func gracePeriodAndCrash() async throws {
        let environment = try ProtectedStoreTestEnvironment(gracePeriod: .seconds(10))
        let controller = await environment.launch()
        try await controller.perform("save") { try await $0.put("k", "v") }
        await environment.lock()
        await environment.advance(by: .seconds(10))
        #expect(!environment.device.isProtectedDataAvailable(for: .complete))
        environment.crash(controller)
        try await environment.unlock()
        let relaunched = await environment.launch()
        #expect(try await relaunched.perform("read") { try await $0.value(forKey: "k") } == "v")
    }
}
