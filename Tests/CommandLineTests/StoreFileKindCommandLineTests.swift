import TestSupport
import Foundation
import Testing

/// Store files that are not what they should be, met by the tool as a user would meet them: each is refused
/// with its code, at once, and left as it is. Every run is under `timeout 60`, so a hang fails the test.
@Suite("store files that are not what they seem, through the tool", .timeLimit(.minutes(3)))
struct StoreFileKindCommandLineTests {
    let directory = TemporaryDirectory()
    var state: String { directory.file("state") }
    var store: String { state + "/app.sqlite" }

    /// A device (passcode 1234) and a store holding alpha=one, its app ended.
    func makeStore() throws {
        let made = try ProtectedStoreBinary.shell(
            ["device setup --passcode 1234", "app launch", "expect store ready", "put alpha one", "app terminate"], state: state)
        try #require(made.status == 0, "\(made.output) \(made.error)")
    }

    /// Unlocks and launches, expecting the attach to fail and present `code`.
    func launchFails(with code: String) throws {
        let result = try ProtectedStoreBinary.shell(
            ["device unlock --passcode 1234", "app launch", "expect store failed", "expect presented-error \(code)"],
            state: state, under: ["timeout", "60"])
        #expect(result.status == 0, "\(result.output) \(result.error)")
        #expect(!result.output.contains("FAILED"), "\(result.output)")
    }

    @Test("`: > app.sqlite`, then unlock and launch: store-damaged, and the file stays empty")
    func emptiedStoreFile() throws {
        try makeStore()
        try Data().write(to: URL(fileURLWithPath: store))
        try launchFails(with: "store-damaged")
        #expect(FileManager.default.contents(atPath: store)?.isEmpty == true)
    }

    @Test("a symbolic link at app.sqlite: io-error, the link left in place")
    func linkedStoreFile() throws {
        try makeStore()
        let target = directory.file("elsewhere.sqlite")
        try FileManager.default.moveItem(atPath: store, toPath: target)
        try FileManager.default.createSymbolicLink(atPath: store, withDestinationPath: target)
        try launchFails(with: "io-error")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: store)) == target)
    }

    @Test("a FIFO at app.sqlite-wal: app launch and store backup fail with io-error instead of hanging")
    func fifoAtWriteAheadLog() throws {
        try makeStore()
        let created = try ProtectedStoreBinary.run(["store", "recovery-key", "create", "--fast-kdf", "--state-dir", state])
        try #require(created.status == 0, "\(created.error)")
        #expect(mkfifo(store + "-wal", 0o600) == 0)
        try launchFails(with: "io-error")
        let backup = try ProtectedStoreBinary.run(
            ["store", "backup", "--to", directory.file("app.backup"), "--state-dir", state], input: "1234\n",
            executable: "timeout", argumentsBefore: ["60", ProtectedStoreBinary.url.path])
        #expect(backup.status != 0 && backup.status != 124, "\(backup.status): \(backup.error)")
        #expect(backup.error.contains("io-error") && backup.error.contains(store + "-wal"), "\(backup.error)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("app.backup")))
    }
}
