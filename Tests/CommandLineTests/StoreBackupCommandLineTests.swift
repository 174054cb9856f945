import TestSupport
import Foundation
import Testing

/// `protected-store store recovery-key create`, `store backup` and `store restore`, end to end through the
/// built binary: a store written on one device comes back on another with the phrase printed once.
@Suite("protected-store store backup and restore", .timeLimit(.minutes(3)))
struct StoreBackupCommandLineTests {
    @Test("recovery-key create prints the phrase once; backup asks only the passcode; restore on a new device brings every value back, then refuses to overwrite it")
    func backupAndRestore() throws {
        let directory = TemporaryDirectory()
        let source = directory.file("source")
        let target = directory.file("target")
        let backup = directory.file("app.backup")
        let made = try ProtectedStoreBinary.shell(
            ["device setup --passcode 1", "app launch", "expect store ready", "put alpha one", "put beta two", "app terminate"],
            state: source)
        #expect(made.status == 0, "\(made.error)")

        let created = try ProtectedStoreBinary.run(["store", "recovery-key", "create", "--fast-kdf", "--state-dir", source])
        #expect(created.status == 0, "\(created.error)")
        let lines = created.output.split(separator: "\n").map(String.init)
        let phrase = try #require(lines.firstIndex { $0.hasPrefix("recovery phrase") }.map { lines[$0 + 1] })
        #expect(phrase.split(separator: "-").count == 8, "\(created.output)")
        let shown = try ProtectedStoreBinary.run(["store", "recovery-key", "show", "--state-dir", source])
        #expect(shown.status == 0 && !shown.output.contains(phrase), "show never prints the phrase")

        let backedUp = try ProtectedStoreBinary.run(["store", "backup", "--to", backup, "--state-dir", source], input: "1\n")
        #expect(backedUp.status == 0, "\(backedUp.output) \(backedUp.error)")
        #expect(backedUp.output.contains("backup written: \(backup)"))
        let again = try ProtectedStoreBinary.run(["store", "backup", "--to", backup, "--state-dir", source], input: "1\n")
        #expect(again.status != 0 && again.error.contains("already-exists"), "\(again.error)")

        let newDevice = try ProtectedStoreBinary.shell(["device setup --passcode 2"], state: target)
        #expect(newDevice.status == 0, "\(newDevice.error)")
        let mistyped = try ProtectedStoreBinary.run(
            ["store", "restore", "--from", backup, "--state-dir", target], input: "2\n\(phrase.dropLast())\n")
        #expect(mistyped.status != 0 && mistyped.error.contains("recovery-phrase-mistyped"), "\(mistyped.error)")
        let restored = try ProtectedStoreBinary.run(
            ["store", "restore", "--from", backup, "--state-dir", target], input: "2\n\(phrase.lowercased())\n")
        #expect(restored.status == 0, "\(restored.output) \(restored.error)")
        try ProtectedStoreBinary.expectStoreHolds(["alpha": "one", "beta": "two"], state: target, passcode: "2")

        let refused = try ProtectedStoreBinary.run(
            ["store", "restore", "--from", backup, "--state-dir", target], input: "2\n\(phrase)\n")
        #expect(refused.status != 0 && refused.error.contains("restore-target-exists"), "\(refused.error)")
        let replaced = try ProtectedStoreBinary.run(
            ["store", "restore", "--from", backup, "--state-dir", target, "--replace"], input: "2\n\(phrase)\n")
        #expect(replaced.status == 0 && replaced.output.contains("kept in \(target)/app.sqlite.replaced-"), "\(replaced.output) \(replaced.error)")
    }

    @Test("backup of a device with no store says store-unavailable naming the store, never an io-error about its key file")
    func backupWithoutAStore() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        let made = try ProtectedStoreBinary.shell(["device setup --passcode 1"], state: state)
        #expect(made.status == 0, "\(made.error)")
        let created = try ProtectedStoreBinary.run(["store", "recovery-key", "create", "--fast-kdf", "--state-dir", state])
        #expect(created.status == 0, "\(created.error)")

        let backedUp = try ProtectedStoreBinary.run(
            ["store", "backup", "--to", directory.file("app.backup"), "--state-dir", state], input: "1\n")
        #expect(backedUp.status != 0)
        #expect(backedUp.error.contains("store-unavailable") && backedUp.error.contains("app.sqlite"), "\(backedUp.error)")
        #expect(!backedUp.error.contains("io-error"), "\(backedUp.error)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("app.backup")))
    }
}
