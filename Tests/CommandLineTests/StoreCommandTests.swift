import TestSupport
import Foundation
import Testing

/// `protected-store store export` and `store migrate`, run as a user would.
@Suite("store export and store migrate")
struct StoreCommandTests {
    let directory = TemporaryDirectory()
    var state: String { directory.file("state") }

    /// A device (passcode 1234) and a store holding alpha=one and beta=two, made through the shell.
    func makeStore() throws {
        let made = try ProtectedStoreBinary.shell(
            ["device setup --passcode 1234", "app launch", "expect store ready", "put alpha one", "put beta two"], state: state)
        try #require(made.status == 0, "\(made.output) \(made.error)")
    }

    func export(_ arguments: [String], input: String) throws -> ProtectedStoreBinary.Result {
        try ProtectedStoreBinary.run(["store", "export", "--state-dir", state] + arguments, input: input)
    }

    static func sqlite3(_ path: String, _ sql: String, program: String = "/usr/bin/sqlite3", input: String? = nil) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = input == nil ? [path, sql] : [path]
        let output = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = stdin
        try process.run()
        if let input { stdin.fileHandleForWriting.write(Data(input.utf8)) }
        try stdin.fileHandleForWriting.close()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    @Test("--plaintext writes a plain SQLite copy (0600) that sqlite3 reads, after a warning on standard error")
    func plaintextExport() throws {
        try makeStore()
        let destination = directory.file("out.sqlite")
        let result = try export(["--to", destination, "--plaintext"], input: "1234\n")
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.contains("warning: --plaintext writes every value of the store UNENCRYPTED"))
        #expect(result.output.contains("exported"))
        let mode = (try FileManager.default.attributesOfItem(atPath: destination)[.posixPermissions] as? Int) ?? -1
        #expect(mode == 0o600)
        #expect(try Self.sqlite3(destination, "SELECT key, value FROM entries ORDER BY key") == "alpha|one\nbeta|two\n")
    }

    @Test("without --plaintext, --key-file or --passphrase nothing is written (usage error); two of them are refused too")
    func encryptionMustBeChosen() throws {
        try makeStore()
        let destination = directory.file("out.sqlite")
        for flags in [[String](), ["--plaintext", "--passphrase"]] {
            let result = try export(["--to", destination] + flags, input: "1234\n")
            #expect(result.status == 64, "\(flags): \(result.error)")
            #expect(result.error.contains("choose how the export is written"))
        }
        #expect(!FileManager.default.fileExists(atPath: destination))
    }

    @Test("an existing file is never replaced: already-exists before the passcode is asked, the file unchanged")
    func neverOverwrites() throws {
        try makeStore()
        let destination = directory.file("taken")
        try Data("mine".utf8).write(to: URL(fileURLWithPath: destination))
        let result = try export(["--to", destination, "--plaintext"], input: "1234\n")
        #expect(result.status == 1)
        #expect(result.error.contains("already-exists"))
        #expect(!result.output.contains("passcode:"), "refused before asking")
        #expect(FileManager.default.contents(atPath: destination) == Data("mine".utf8))
    }

    @Test("--key-file: a SQLCipher file that the key opens with format 1's documented settings (sqlcipher shell); a wrong passcode exports nothing")
    func keyFileExport() throws {
        try makeStore()
        let keyFile = directory.file("export.key")
        let key = (0..<32).map { UInt8($0 * 7 + 1) }
        try #require(FileManager.default.createFile(atPath: keyFile, contents: Data(key), attributes: [.posixPermissions: 0o600]))
        let wrong = try export(["--to", directory.file("never"), "--key-file", keyFile], input: "9999\n")
        #expect(wrong.status == 1 && wrong.error.contains("wrong-passcode"))
        #expect(!FileManager.default.fileExists(atPath: directory.file("never")))
        let destination = directory.file("out.sqlcipher")
        let result = try export(["--to", destination, "--key-file", keyFile], input: "1234\n")
        #expect(result.status == 0, "\(result.error)")
        #expect(!result.error.contains("warning"))
        let head = try #require(FileManager.default.contents(atPath: destination)).prefix(16)
        #expect(head != Data("SQLite format 3\0".utf8), "not plain SQLite")
        let hex = key.map { String(format: "%02x", $0) }.joined()
        let settings = "PRAGMA key = \"x'\(hex)'\";\nPRAGMA cipher_page_size = 4096;\nPRAGMA cipher_use_hmac = ON;\nPRAGMA kdf_iter = 64000;\nPRAGMA fast_kdf_iter = 2;\nPRAGMA cipher_hmac_pgno = le;\nPRAGMA cipher_hmac_salt_mask = \"x'3a'\";\n"
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlcipher"), "the sqlcipher shell (apt: sqlcipher)")
        let read = try Self.sqlite3(destination, "", program: "/usr/bin/sqlcipher", input: settings + "SELECT key, value FROM entries ORDER BY key;\n")
        #expect(read.hasSuffix("alpha|one\nbeta|two\n"), "\(read)")
        // A key file others can read is refused.
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: keyFile)
        let loose = try export(["--to", directory.file("loose"), "--key-file", keyFile], input: "1234\n")
        #expect(loose.status == 1 && loose.error.contains("insecure-permissions"), "\(loose.error)")
    }

    @Test("--passphrase: the passphrase is the line after the passcode; an empty one is refused")
    func passphraseExport() throws {
        try makeStore()
        let empty = try export(["--to", directory.file("empty"), "--passphrase"], input: "1234\n\n")
        #expect(empty.status != 0 && empty.error.contains("empty passphrase"))
        #expect(!FileManager.default.fileExists(atPath: directory.file("empty")))
        let destination = directory.file("out.passphrase")
        let result = try export(["--to", destination, "--passphrase"], input: "1234\nsecret words\n")
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains("Argon2id, 3 passes, 64 MiB"))
        #expect(FileManager.default.fileExists(atPath: destination))
    }

    @Test(
        "store migrate on SQLCipher 3 is refused with migration-unsupported naming 3.4.1 and format 2, before asking anything, nothing changed",
        .enabled(if: FileManager.default.fileExists(atPath: "/usr/share/doc/libsqlcipher0")))
    func migrateRefused() throws {
        try makeStore()
        let store = state + "/app.sqlite"
        let before = [store, store + ".key"].map { FileManager.default.contents(atPath: $0) }
        let result = try ProtectedStoreBinary.run(["store", "migrate", "--state-dir", state], input: "1234\n")
        #expect(result.status == 1)
        #expect(result.error.contains("migration-unsupported"))
        #expect(result.error.contains("format 2 (SQLCipher 4, 4096-byte pages, HMAC-SHA512)"))
        #expect(result.error.contains("linked with SQLCipher 3."), "\(result.error)")
        #expect(!result.output.contains("passcode:"))
        #expect([store, store + ".key"].map { FileManager.default.contents(atPath: $0) } == before)
        #expect(!FileManager.default.fileExists(atPath: store + ".rewrite"))
    }

    @Test("while the app runs in another process (through device serve), store export copies what it acknowledged, and the app goes on", .timeLimit(.minutes(3)))
    func exportWhileAppRuns() throws {
        let agent = try LiveProcess.agent(state: state)
        defer { agent.kill() }
        let app = try LiveProcess.shell(state: state)
        defer { app.kill() }
        try app.commands(["device setup --passcode 1234", "app launch", "expect store ready", "put during one", "put also two"])
        let destination = directory.file("live.sqlite")
        let result = try export(["--to", destination, "--plaintext"], input: "1234\n")
        #expect(result.status == 0, "\(result.output) \(result.error)")
        #expect(try Self.sqlite3(destination, "SELECT key, value FROM entries ORDER BY key") == "also|two\nduring|one\n")
        let after = try app.commands(["put later three", "expect value later three", "expect value during one"])
        #expect(!after.output.contains("FAILED"), "\(after.output) \(after.errors)")
    }
}
