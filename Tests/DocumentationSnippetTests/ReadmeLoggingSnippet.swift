import Testing

// The README's block in "Logging" (scripts/doc-snippets.py checks that the region is, byte for byte, the README's
// block). It runs in a process of its own (an exit test): the logging system can be bootstrapped once per
// process, and the test process's belongs to the suites that capture logs.

// snippet.readme-logging
import Logging
// snippet.hide

/// The README's logging set-up, in a child process.
@Suite("README.md: logging", .timeLimit(.minutes(3)))
struct ReadmeLoggingSnippet {
    @Test("readme-logging: bootstrapped at debug, a launch logs under protected-store.launch to standard error")
    func bootstrapShowsTheLaunch() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            // snippet.show

            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = .debug
                return handler
            }
            // snippet.end
            try await launchOnce()
        }
        let standardError = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(standardError.contains("protected-store.launch"))
        #expect(standardError.contains("debug"))
    }
}
