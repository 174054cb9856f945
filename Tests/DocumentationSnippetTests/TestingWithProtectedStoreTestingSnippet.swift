// The code of Sources/ProtectedStoreTesting/Documentation.docc/TestingWithProtectedStoreTesting.md
// (scripts/doc-snippets.py checks that the region is, byte for byte, the article's block). The region is itself
// a test: it runs with the others.

// snippet.testing-locked-launch
import ProtectedStoreTesting
import Testing
// snippet.hide

/// The article's test of the locked launch (in a suite of its own: the README has a test of the same name).
@Suite("TestingWithProtectedStoreTesting.md", .timeLimit(.minutes(3)))
struct TestingWithProtectedStoreTestingSnippet {
    // snippet.show

    @Test @MainActor func queuedSaveRunsAfterUnlock() async throws {
        let environment = try ProtectedStoreTestEnvironment()
        _ = await environment.launch()                           // creates the store
        try await environment.reboot()                           // before the first unlock
        let controller = await environment.launch(LaunchOptions(reason: .location))
        try controller.submit("save") { try await $0.put("k", "v") }
        #expect(controller.phase == .waitingForProtectedData)
        #expect(controller.queuedOperationNames == ["save"])
        try await environment.unlock()
        #expect(controller.phase == .ready && controller.queuedOperationCount == 0)
    }
    // snippet.end
}
