import Foundation
import TestSupport
import Testing

/// One device per state directory: a second process that would boot its own device on a directory another
/// process owns is refused, so it can never reset what the first one keeps (issue #19).
@Suite("One state directory, one owner: without an agent a second shell is refused", .timeLimit(.minutes(3)))
struct StateInUseTests {
    static let prompt = "] > "

    @Test("two shells on one state directory without an agent: the second is refused, exit ≠ 0, the counter is intact")
    func secondShellIsRefused() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        let first = try TerminalSession(["shell", "--fast-kdf", "--state-dir", state])
        try first.waitFor(Self.prompt)
        try first.converse([
            .type("device setup --passcode 1234", until: Self.prompt),
            .type("device lock", until: Self.prompt),  // an unlocked device does not check a passcode
            .type("device unlock --passcode 0000", until: "wrong passcode (1 failed attempt)", Self.prompt),
            .type("device unlock --passcode 0000", until: "wrong passcode (2 failed attempts)", Self.prompt),
            .type("device unlock --passcode 0000", until: "wrong passcode (3 failed attempts)", Self.prompt),
            .type("status", until: "failed attempts 3", Self.prompt),
        ])

        // While the first shell runs, a second one on the same directory: its device would read the count from
        // the state file and write its own over it (the right passcode would reset it to 0).
        let second = try ProtectedStoreBinary.shell(["device unlock --passcode 1234", "status"], state: state)
        #expect(second.status != 0, "the second shell ran: \(second.output)")
        #expect(second.error.contains("state-in-use"), "\(second.error)")
        #expect(second.error.contains("in use by process \(first.process.processIdentifier)"), "\(second.error)")
        #expect(!second.output.contains("unlocked"), "\(second.output)")

        // The first shell's device is untouched, and what it writes goes on from there.
        try first.converse([
            .type("status", until: "failed attempts 3", Self.prompt),
            .type("device unlock --passcode 0000", until: "wrong passcode (4 failed attempts)", Self.prompt),
            .type("quit"),
        ])
        #expect(try first.finish() == 0, "\(first.transcript)")

        // Once it has quit, the directory is free again, with the count it persisted.
        let third = try ProtectedStoreBinary.shell(["status"], state: state)
        #expect(third.status == 0, "\(third.error)")
        #expect(third.output.contains("failed attempts 4"), "\(third.output)")
    }

    @Test("a shell owns its directory from its start, before any device is set up: a second one is refused at once")
    func ownedBeforeSetUp() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        let first = try LiveProcess.shell(state: state)
        defer { first.kill() }
        try first.commands([])
        let second = try ProtectedStoreBinary.shell(["device setup --passcode 1234"], state: state)
        #expect(second.status != 0, "\(second.output)")
        #expect(second.error.contains("state-in-use") && second.error.contains("process \(first.processID)"), "\(second.error)")
        // So the first one's set-up is its own, and its device is the one on disk.
        try first.commands(["device setup --passcode 1234", "expect error none", "expect device unlocked"])
        #expect(first.finish() == 0, "\(first.printed) \(first.errors)")
    }
}
