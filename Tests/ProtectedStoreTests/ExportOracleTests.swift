import TestSupport
import EncryptedSQLite
import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// The recipe keys/README.md documents for opening a passphrase or key export, read from the file.
enum DocumentedExportRecipe {
    static func section() throws -> Substring {
        let readme = try String(contentsOfFile: SQLCipher4Oracle.packageRoot + "/keys/README.md", encoding: .utf8)
        let start = try #require(readme.range(of: "## Exports"))
        let rest = readme[start.upperBound...]
        let end = rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex
        return rest[..<end]
    }

    /// The pragmas after the key, in the block that follows "To open one".
    static func pragmas() throws -> [String] {
        let section = try section()
        let marker = try #require(section.range(of: "To open one"))
        let rest = section[marker.upperBound...]
        let open = try #require(rest.range(of: "```\n"))
        let close = try #require(rest[open.upperBound...].range(of: "```"))
        let lines = rest[open.upperBound..<close.lowerBound].split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("PRAGMA key") == true)
        return lines.filter { $0.hasPrefix("PRAGMA ") && !$0.hasPrefix("PRAGMA key") }
    }

    /// Argon2id's `opslimit` and `memlimit` as the section states them.
    static func argon2() throws -> PasscodeKDF {
        let section = try section()
        func number(after name: String) throws -> UInt64 {
            let range = try #require(section.range(of: name + " = "))
            return try #require(UInt64(section[range.upperBound...].prefix { $0.isNumber }))
        }
        return PasscodeKDF(opsLimit: try number(after: "opslimit"), memLimit: try number(after: "memlimit"))
    }
}

/// A store with rows, exported through `StoreCoordinator.export` without attaching it.
func exportedStore(_ encryption: ExportEncryption, to name: String) async throws -> (FaultFixture, String, [String: String]) {
    let fixture = FaultFixture(stateFolder: "state")
    try fixture.setUpDevice()
    try await fixture.withStore { coordinator in
        for index in 0..<50 { try await fixture.put("k\(index)", "value ☕ \(index)", in: coordinator) }
    }
    let destination = fixture.directory.file(name)
    try await StoreCoordinator.export(fixture.configuration, keys: fixture.device!, to: destination, encryption: encryption)
    return (fixture, destination, fixture.acknowledged)
}

@Suite("Exports read by other programs")
struct ExportReadersTests {
    @Test("Python's sqlite3 reads a plaintext export (exported without attaching the store)")
    func pythonReadsPlaintext() async throws {
        let (fixture, destination, expected) = try await exportedStore(.plaintext, to: "plain.sqlite")
        defer { withExtendedLifetime(fixture) {} }
        let python = "/usr/bin/python3"
        try #require(FileManager.default.isExecutableFile(atPath: python))
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [
            "-c", "import json, sqlite3, sys; print(json.dumps(dict(sqlite3.connect(sys.argv[1]).execute('SELECT key, value FROM entries'))))",
            destination,
        ]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(try JSONDecoder().decode([String: String].self, from: data) == expected)
    }
}

@Suite("Export of an attached store")
struct AttachedStoreExportTests {
    @Test("an attached store exports through its coordinator while writes go on: the copy holds whole transactions, in order; after its app closed it, closed")
    func exportWhileWriting() async throws {
        let fixture = FaultFixture(stateFolder: "state")
        try fixture.setUpDevice()
        let coordinator = try await StoreCoordinator.attach(fixture.configuration, keys: fixture.device!)
        for index in 0..<20 { try await coordinator.put(String(format: "k%04d", index), "v") }
        let writes = Task {
            for index in 20..<400 { try await coordinator.put(String(format: "k%04d", index), "v") }
        }
        let key = try SecureBytes.random(count: 32)
        let destination = fixture.directory.file("live.export")
        try await coordinator.export(to: destination, encryption: .key(key))
        try await writes.value
        let copy = try Database(openingUntrustedFileAt: destination, key: key)
        let keys = try copy.rows("SELECT key FROM entries ORDER BY key").compactMap { $0[0].string }
        copy.close()
        #expect(keys.count >= 20)
        #expect(keys == (0..<keys.count).map { String(format: "k%04d", $0) }, "a prefix of the commits, none torn")
        await coordinator.close()
        let error = await #expect(throws: StoreError.self) {
            try await coordinator.export(to: fixture.directory.file("after-close"), encryption: .plaintext)
        }
        #expect(error?.code == .closed, "closed by its app, not by a lock")
        #expect(!FileManager.default.fileExists(atPath: fixture.directory.file("after-close")))
    }
}

@Suite(
    "SQLCipher 4 oracle: exports",
    .enabled(if: SQLCipher4Oracle.isAvailable, "pip could not install sqlcipher3-binary (see the line above: no network?)"))
struct ExportOracleTests {
    static func entries(_ reading: SQLCipher4Oracle.Reading) -> [String: String] {
        Dictionary(uniqueKeysWithValues: (reading.tables["entries"] ?? []).map { ($0[0].text ?? "", $0[1].text ?? "") })
    }

    @Test("SQLCipher 4 opens a key export with the user's key and the documented settings alone, integrity-checked")
    func keyExport() async throws {
        let key = try SecureBytes.random(count: 32)
        let (fixture, destination, expected) = try await exportedStore(.key(key), to: "export.key-sqlcipher")
        defer { withExtendedLifetime(fixture) {} }
        let answer = try SQLCipher4Oracle.read(
            databases: [destination], keyHex: try key.withUnsafeBytes { Array($0) }.hex, pragmas: try DocumentedExportRecipe.pragmas())
        let reading = try #require(answer.databases[destination])
        #expect(reading.integrity.isEmpty, "\(reading.integrity)")
        #expect(Self.entries(reading) == expected)
    }

    @Test("SQLCipher 4 opens a passphrase export with Argon2id(passphrase, the file's first 16 bytes, the documented cost) and the documented settings")
    func passphraseExport() async throws {
        let passphrase = try SecureBytes(utf8: "a phrase I wrote down")
        let (fixture, destination, expected) = try await exportedStore(.passphrase(passphrase), to: "export.passphrase")
        defer { withExtendedLifetime(fixture) {} }
        let salt = Array(try #require(FileManager.default.contents(atPath: destination)).prefix(16))
        let derived = try DocumentedExportRecipe.argon2().deriveKey(from: passphrase, salt: salt)
        let answer = try SQLCipher4Oracle.read(
            databases: [destination], keyHex: try derived.withUnsafeBytes { Array($0) }.hex, pragmas: try DocumentedExportRecipe.pragmas())
        let reading = try #require(answer.databases[destination])
        #expect(reading.integrity.isEmpty)
        #expect(Self.entries(reading) == expected)
        // The oracle can fail: the passphrase's bytes as a raw key do not open it.
        let otherKey = try SecureBytes.random(count: 32)
        #expect(throws: SQLCipher4Oracle.Failure.self) {
            _ = try SQLCipher4Oracle.read(
                databases: [destination], keyHex: try otherKey.withUnsafeBytes { Array($0) }.hex, pragmas: try DocumentedExportRecipe.pragmas())
        }
    }
}
