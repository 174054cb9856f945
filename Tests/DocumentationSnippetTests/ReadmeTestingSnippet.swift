// The README's "Testing your app: `ProtectedStoreTesting`" block (scripts/doc-snippets.py checks that the region
// is, byte for byte, the README's block). The region is itself a test: it runs with the others.

// snippet.readme-testing
import ProtectedStoreTesting   // brings ProtectedStore and the simulated device
import Testing
// snippet.hide

/// README.md's test of the locked launch (in a suite of its own: the DocC article has a test of the same name).
@Suite("README.md: Testing your app", .timeLimit(.minutes(3)))
struct ReadmeTestingSnippet {
    // snippet.show

    @Test @MainActor func queuedSaveRunsAfterUnlock() async throws {
        let environment = try ProtectedStoreTestEnvironment()
        _ = await environment.launch()                                   // creates the store
        try await environment.reboot()                                   // before first unlock
        let controller = await environment.launch(LaunchOptions(reason: .location))
        try controller.submit("save") { try await $0.put("k", "v") }
        #expect(controller.queuedOperationNames == ["save"])
        try await environment.unlock()
        #expect(controller.phase == .ready && controller.queuedOperationCount == 0)
    }
    // snippet.end
}
