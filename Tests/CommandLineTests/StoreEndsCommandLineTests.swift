import TestSupport
import Foundation
import Testing

/// The ends of `store backup`, `store restore`, `store export` and `store recovery-key`, run as a user would: a
/// target inside the state directory, a permissive umask, a passcode given to a device another process
/// unlocked, a state directory others may write.
@Suite("store backup, restore and export at their ends", .timeLimit(.minutes(3)))
struct StoreEndsCommandLineTests {
    let directory = TemporaryDirectory()
    var state: String { directory.file("state") }

    /// A device (passcode 1) with a store holding alpha=one, and its recovery key; returns the phrase.
    func makeStore() throws -> String {
        let made = try ProtectedStoreBinary.shell(
            ["device setup --passcode 1", "app launch", "expect store ready", "put alpha one", "app terminate"], state: state)
        try #require(made.status == 0, "\(made.error)")
        let created = try ProtectedStoreBinary.run(["store", "recovery-key", "create", "--fast-kdf", "--state-dir", state])
        try #require(created.status == 0, "\(created.error)")
        let lines = created.output.split(separator: "\n").map(String.init)
        return try #require(lines.firstIndex { $0.hasPrefix("recovery phrase") }.map { lines[$0 + 1] })
    }

    /// Every file under `folder` (relative path) with its bytes.
    static func contents(of folder: String) -> [String: Data] {
        var found: [String: Data] = [:]
        for case let name as String in FileManager.default.enumerator(atPath: folder) ?? FileManager.DirectoryEnumerator() {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder + "/" + name, isDirectory: &isFolder), !isFolder.boolValue {
                found[name] = FileManager.default.contents(atPath: folder + "/" + name) ?? Data()
            }
        }
        return found
    }

    static func mode(_ path: String) -> Int {
        (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
    }

    /// Runs the binary under `umask MASK` (a shell sets it, then execs the binary).
    static func run(umask mask: String, _ arguments: [String], input: String? = nil) throws -> ProtectedStoreBinary.Result {
        try ProtectedStoreBinary.run(
            arguments, input: input, executable: "sh",
            argumentsBefore: ["-c", "umask \(mask) && exec \"$0\" \"$@\"", ProtectedStoreBinary.url.path])
    }

    @Test("backup --replace and export aimed at a file of the state directory, at a new name inside it, through .. or a link, are refused (invalid-argument) and change nothing")
    func targetInsideStateDirectoryIsRefused() throws {
        _ = try makeStore()
        let link = directory.file("link-to-key")
        #expect(symlink(state + "/app.sqlite.key", link) == 0)
        let before = Self.contents(of: state)
        let targets = [
            state + "/app.sqlite.key", state + "/device/device.keybag", state + "/hardware/uid.key", state,
            state + "/new.backup", directory.file("state/../state/app.sqlite"), link,
        ]
        for target in targets {
            let backup = try ProtectedStoreBinary.run(
                ["store", "backup", "--replace", "--to", target, "--state-dir", state], input: "1\n")
            #expect(backup.status != 0 && backup.error.contains("invalid-argument"), "backup to \(target): \(backup.error)")
            #expect(backup.error.contains("state directory"), "\(backup.error)")
            let export = try ProtectedStoreBinary.run(
                ["store", "export", "--plaintext", "--to", target, "--state-dir", state], input: "1\n")
            #expect(export.status != 0 && export.error.contains("invalid-argument"), "export to \(target): \(export.error)")
        }
        #expect(Self.contents(of: state) == before, "nothing in the state directory changed")
        try ProtectedStoreBinary.expectStoreHolds(["alpha": "one"], state: state)
        let outside = try ProtectedStoreBinary.run(
            ["store", "backup", "--to", directory.file("outside.backup"), "--state-dir", state], input: "1\n")
        #expect(outside.status == 0, "a backup outside the state directory is written: \(outside.error)")
    }

    @Test("under umask 022 and 000, a restored store, its -wal and -shm, and the backup and export files are 0600", arguments: ["022", "000"])
    func restoredFilesArePrivate(mask: String) throws {
        let phrase = try makeStore()
        let backup = directory.file("app.backup")
        let backedUp = try Self.run(umask: mask, ["store", "backup", "--to", backup, "--state-dir", state], input: "1\n")
        try #require(backedUp.status == 0, "\(backedUp.error)")
        #expect(Self.mode(backup) == 0o600, "the backup file")
        let export = directory.file("app.export")
        let exported = try Self.run(umask: mask, ["store", "export", "--plaintext", "--to", export, "--state-dir", state], input: "1\n")
        try #require(exported.status == 0, "\(exported.error)")
        #expect(Self.mode(export) == 0o600, "the export file")

        let target = directory.file("target")
        let setUp = try ProtectedStoreBinary.shell(["device setup --passcode 2"], state: target)
        try #require(setUp.status == 0, "\(setUp.error)")
        let restored = try Self.run(
            umask: mask, ["store", "restore", "--from", backup, "--state-dir", target], input: "2\n\(phrase)\n")
        try #require(restored.status == 0, "\(restored.error)")
        #expect(Self.mode(target + "/app.sqlite") == 0o600, "the restored store")
        // The app opens it (in WAL mode): SQLite gives -wal and -shm the store file's mode. The app crashes, so
        // they stay (a shell that ends terminates its app, and the last close removes them).
        let opened = try Self.run(
            umask: mask, ["shell", "--fast-kdf", "--state-dir", target],
            input: "device unlock --passcode 2\napp launch\nexpect store ready\nexpect value alpha one\nput beta two\napp crash\n")
        #expect(opened.status == 0 && !opened.output.contains("FAILED"), "\(opened.output) \(opened.error)")
        let files = try FileManager.default.contentsOfDirectory(atPath: target).filter { $0.hasPrefix("app.sqlite") }
        #expect(files.contains("app.sqlite-wal") && files.contains("app.sqlite-shm"), "\(files)")
        for name in files {
            #expect(Self.mode(target + "/" + name) == 0o600, "\(name) under umask \(mask)")
        }
    }

    @Test("through an agent whose device is unlocked, store export checks the passcode: a wrong one is wrong-passcode, counted, and nothing is written")
    func exportThroughAgentChecksPasscode() throws {
        let agent = try LiveProcess.agent(state: state)
        defer { agent.kill() }
        let app = try LiveProcess.shell(state: state)
        defer { app.kill() }
        try app.commands(["device setup --passcode 1234", "app launch", "expect store ready", "put alpha one"])
        let destination = directory.file("export.sqlite")
        for attempt in 1...2 {
            let wrong = try ProtectedStoreBinary.run(
                ["store", "export", "--plaintext", "--to", destination, "--state-dir", state], input: "9999\n")
            #expect(wrong.status != 0 && wrong.error.contains("wrong-passcode"), "\(wrong.output) \(wrong.error)")
            #expect(wrong.error.contains("\(attempt) failed attempt"), "the attempt is counted: \(wrong.error)")
            #expect(!FileManager.default.fileExists(atPath: destination), "nothing written")
        }
        let right = try ProtectedStoreBinary.run(
            ["store", "export", "--plaintext", "--to", destination, "--state-dir", state], input: "1234\n")
        #expect(right.status == 0, "\(right.error)")
        #expect(FileManager.default.fileExists(atPath: destination))
    }

    @Test("store recovery-key show refuses a state directory others can write (insecure-state-directory), as every other command does")
    func recoveryKeyShowRefusesWritableStateDirectory() throws {
        _ = try makeStore()
        #expect(chmod(state, 0o777) == 0)
        defer { chmod(state, 0o700) }
        let shown = try ProtectedStoreBinary.run(["store", "recovery-key", "show", "--state-dir", state])
        #expect(shown.status != 0 && shown.error.contains("insecure-state-directory"), "\(shown.output) \(shown.error)")
        #expect(!shown.output.contains("recovery key"), "\(shown.output)")
    }
}
