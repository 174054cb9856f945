import Foundation
import ProtectedStore
import SecureKeys
import TestSupport
import Testing

/// The app in one process, an extension appending to its store's inbox in another. One process owns a state
/// directory's device (`StateDirectoryLock`): the app here, a shell; the extension (this test process) boots
/// no device, as sealing a record needs only the inbox's public key file.
@Suite("Locked inbox across processes", .timeLimit(.minutes(3)))
struct TwoProcessInboxTests {
    static let prompt = "] > "

    @Test("a record another process appends while the store is ready is merged at the app's next poll, with no call from the app")
    func secondProcessAppendIsMerged() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        // The app: a shell whose controller polls its inbox every second of its (manual) clock.
        let app = try TerminalSession(["shell", "--fast-kdf", "--state-dir", state])
        try app.waitFor(Self.prompt)
        try app.converse([
            .type("device setup --passcode 1", until: Self.prompt),
            .type("app launch", until: Self.prompt),
            .type("expect store ready", until: "ok", Self.prompt),
        ])

        // The extension, in this process, seals a record into the same store's inbox.
        _ = try LockedInbox(files: StoreFiles(database: state + "/app.sqlite"))
            .append(.put(key: "from-extension", value: "hello-from-another-process"))

        // The poll interval itself is checked by `InboxQuarantineControllerTests.pollMergesForeignAppends`;
        // here, that a record from another process waits for the poll and is merged by it, with no command
        // of the app's.
        try app.converse([
            .type("expect inbox 1", until: "ok", Self.prompt),
            .type("clock advance 1s", until: "merged", Self.prompt),
            .type("expect value from-extension hello-from-another-process", until: "ok", Self.prompt),
            .type("expect inbox 0", until: "ok", Self.prompt),
            .type("quit"),
        ])
        #expect(try app.finish() == 0, "\(app.transcript)")
    }
}
