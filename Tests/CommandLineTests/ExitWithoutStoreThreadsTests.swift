import TestSupport
import Foundation
import Testing

/// No command of the tool exits while one of the store's threads runs. `exit` runs the libraries' exit handlers;
/// OpenSSL's freed what SQLCipher's close, still running on a store thread, used: a shell whose input ended with
/// its app running crashed with SIGSEGV in libcrypto (CI, `KeyStoreCommandLineTests`). The tool checks before
/// each exit and fails with status 70 and `internal error` when a thread runs; these tests end each kind of
/// command with a store open, where that check would fire if the command left it open.
@Suite("the tool exits with no store thread running", .timeLimit(.minutes(3)))
struct ExitWithoutStoreThreadsTests {
    let directory = TemporaryDirectory()
    var state: String { directory.file("state") }

    static func expectCleanExit(_ result: ProtectedStoreBinary.Result, status: Int32 = 0, _ what: String) {
        #expect(result.status == status, "\(what): \(result.output.suffix(600)) \(result.error.suffix(600))")
        #expect(!result.error.contains("internal error"), "\(what): \(result.error)")
    }

    @Test("a shell whose input ends while its app is ready terminates the app: exit 0, and the log was checkpointed away")
    func shellEndsWithTheAppReady() throws {
        let result = try ProtectedStoreBinary.shell(
            ["device setup --passcode 1", "app launch", "expect store ready", "put alpha one", "get alpha"], state: state)
        Self.expectCleanExit(result, "the shell")
        let files = try FileManager.default.contentsOfDirectory(atPath: state)
        #expect(!files.contains("app.sqlite-wal"), "the app's last close checkpoints and removes the log: \(files)")
        try ProtectedStoreBinary.expectStoreHolds(["alpha": "one"], state: state)
    }

    @Test("a shell that stops at a failed expect while its app is ready exits 1, not 70")
    func shellStopsWithTheAppReady() throws {
        let result = try ProtectedStoreBinary.shell(
            ["device setup --passcode 1", "app launch", "put alpha one", "expect value alpha two", "put never reached"],
            state: state)
        Self.expectCleanExit(result, status: 1, "the shell")
        #expect(result.error.contains("FAILED"), "\(result.error)")
    }

    @Test("a script that ends while its app is ready, and one whose expect fails there, exit 0 and 1")
    func scriptEndsWithTheAppReady() throws {
        let ready = directory.file("ready.scenario")
        try "device setup --passcode 1\napp launch\nput alpha one\n".write(toFile: ready, atomically: true, encoding: .utf8)
        Self.expectCleanExit(try ProtectedStoreBinary.run(["run", "--fast-kdf", ready]), "run")
        let failing = directory.file("failing.scenario")
        try "device setup --passcode 1\napp launch\nput alpha one\nexpect value alpha two\n"
            .write(toFile: failing, atomically: true, encoding: .utf8)
        Self.expectCleanExit(try ProtectedStoreBinary.run(["run", "--fast-kdf", failing]), status: 1, "run, failing")
    }

    @Test("store export and backup return after the thread they ran on ended")
    func storeCommandsLeaveNoThread() throws {
        let made = try ProtectedStoreBinary.shell(["device setup --passcode 1", "app launch", "put alpha one"], state: state)
        Self.expectCleanExit(made, "the shell")
        let created = try ProtectedStoreBinary.run(["store", "recovery-key", "create", "--fast-kdf", "--state-dir", state])
        Self.expectCleanExit(created, "recovery-key create")
        Self.expectCleanExit(
            try ProtectedStoreBinary.run(
                ["store", "export", "--plaintext", "--to", directory.file("app.export"), "--state-dir", state], input: "1\n"),
            "store export")
        Self.expectCleanExit(
            try ProtectedStoreBinary.run(
                ["store", "backup", "--to", directory.file("app.backup"), "--state-dir", state], input: "1\n"),
            "store backup")
    }
}
