import TestSupport
import Foundation
import SecureKeys
import Testing

@testable import EncryptedSQLite

/// A store's format is pinned at open, every setting explicit, and the pragmas that pin it are the ones
/// keys/README.md documents.
@Suite("Store format", .serialized)
struct StoreFormatTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes
    var path: String { directory.file("store.sqlite") }

    init() throws { key = try SecureBytes.random(count: 32) }

    /// The PRAGMA lines (without the key) of the fenced block in keys/README.md that follows `marker`.
    static func documentedPragmas(after marker: String) throws -> [String] {
        let readme = try String(contentsOfFile: SQLCipher4Oracle.packageRoot + "/keys/README.md", encoding: .utf8)
        let start = try #require(readme.range(of: marker), "keys/README.md says \"\(marker)\"")
        let rest = readme[start.upperBound...]
        let open = try #require(rest.range(of: "```\n"))
        let close = try #require(rest[open.upperBound...].range(of: "```"))
        return rest[open.upperBound..<close.lowerBound].split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0.hasPrefix("PRAGMA ") && !$0.hasPrefix("PRAGMA key") }
            .map { String($0.dropLast(1)) }  // the `;`
    }

    @Test("the settings set on SQLCipher 3 and on SQLCipher 4 are, line for line, the ones keys/README.md documents")
    func settingsAreTheDocumentedOnes() throws {
        let v3 = try CipherSettings(format: .sqlcipher3Raw4096, library: try #require(SQLCipherVersion(reported: "3.4.1")))
        let v4 = try CipherSettings(
            format: .sqlcipher3Raw4096, library: try #require(SQLCipherVersion(reported: "4.12.0 community")))
        #expect(try Self.documentedPragmas(after: "On SQLCipher 3 (3.4.1 is what Debian bookworm links), the library sets:") == v3.pragmas)
        #expect(try Self.documentedPragmas(after: "SQLCipher 4 program, the `sqlcipher` shell") == v4.pragmas)
    }

    @Test("format 2 (SQLCipher 4, HMAC-SHA512) is refused on SQLCipher 3 naming both, and its SQLCipher 4 settings are the ones keys/README.md documents")
    func formatTwoSettings() throws {
        let v3 = try #require(SQLCipherVersion(reported: "3.4.1"))
        let error = #expect(throws: StoreError.self) { _ = try CipherSettings(format: .sqlcipher4Raw4096, library: v3) }
        #expect(error?.code == .storeUnavailable)
        #expect(error?.message.contains("format 2 (SQLCipher 4, 4096-byte pages, HMAC-SHA512)") == true)
        #expect(error?.message.contains("SQLCipher 3.4.1") == true && error?.message.contains("SQLCipher 4 or later") == true)
        let v4 = try CipherSettings(format: .sqlcipher4Raw4096, library: try #require(SQLCipherVersion(reported: "4.6.1 community")))
        #expect(try Self.documentedPragmas(after: "version). On SQLCipher 4, key it, then set:") == v4.pragmas)
        #expect(StoreFormat(recordedIdentifier: 2) == .sqlcipher4Raw4096 && StoreFormat.migrationTarget == .sqlcipher4Raw4096)
    }

    @Test("a copy cannot be written in a format the linked SQLCipher cannot write: refused before a file is made")
    func copyInUnwritableFormatRefused() throws {
        let database = try Database(path: directory.file("source.sqlite"), key: SecureBytes.random(count: 32))
        try database.execute("CREATE TABLE t(a)")
        let library = try #require(Database.linkedSQLCipher)
        guard library.major == 3 else { return }
        let copy = directory.file("copy.sqlite")
        let error = #expect(throws: StoreError.self) {
            try database.writeCopy(toNewFileAt: copy, keying: .raw(try SecureBytes.random(count: 32), salt: nil), format: .sqlcipher4Raw4096)
        }
        #expect(error?.code == .storeUnavailable)
        #expect(!FileManager.default.fileExists(atPath: copy))
    }

    @Test("every setting of format 1 is set at open: a store made while the process's SQLCipher defaults say otherwise is format 1")
    func settingsDoNotDependOnTheLibraryDefaults() throws {
        let other = try Database(path: directory.file("other.sqlite"), key: SecureBytes.random(count: 32))
        // Process-wide defaults, as any code in the process could set them; put back before anything else.
        try other.execute("PRAGMA cipher_default_use_hmac = OFF")
        try other.execute("PRAGMA cipher_default_kdf_iter = 4000")
        do {
            defer {
                try? other.execute("PRAGMA cipher_default_use_hmac = ON")
                try? other.execute("PRAGMA cipher_default_kdf_iter = 64000")
            }
            let database = try Database(path: path, key: key)
            try database.execute("CREATE TABLE t(a); INSERT INTO t VALUES ('kept')")
            #expect(try database.scalar("PRAGMA cipher_use_hmac")?.string == "1")
            database.close()
        }
        // With the defaults back, only a file written with HMAC on (format 1) opens and reads.
        let reopened = try Database(path: path, key: key)
        #expect(try reopened.scalar("SELECT a FROM t")?.string == "kept")
        #expect(try reopened.integrityCheck() == ["ok"])
    }

    @Test("a store that does not open with its key says which format it was opened as, on which SQLCipher")
    func wrongKeyNamesFormatAndLibrary() throws {
        let database = try Database(path: path, key: key)
        try database.execute("CREATE TABLE t(a)")
        database.close()
        let error = #expect(throws: StoreError.self) { _ = try Database(path: path, key: SecureBytes.random(count: 32)) }
        let library = try #require(Database.linkedSQLCipher)
        #expect(error?.code == .wrongKey)
        #expect(
            error?.message.contains("opened as format 1 (SQLCipher 3, 4096-byte pages, HMAC-SHA1) with \(library)") == true,
            "\(String(describing: error))")
    }

    @Test("the linked SQLCipher is read at start-up and each connection records the settings it opened with")
    func linkedVersionIsRead() throws {
        let library = try #require(Database.linkedSQLCipher)
        #expect(library.major >= 3)
        let database = try Database(path: path, key: key)
        #expect(database.cipherVersion == library.reported)
        #expect(database.cipherSettings == (try CipherSettings(format: .sqlcipher3Raw4096, library: library)))
    }

    @Test("SQLCipher versions parse from what cipher_version reports, and nothing else does")
    func versionsParse() throws {
        let debian = try #require(SQLCipherVersion(reported: "3.4.1"))
        #expect((debian.major, debian.minor, debian.patch) == (3, 4, 1))
        let pypi = try #require(SQLCipherVersion(reported: "4.12.0 community"))
        #expect((pypi.major, pypi.minor, pypi.patch) == (4, 12, 0))
        #expect(SQLCipherVersion(reported: "4.6")?.minor == 6)
        for bad in ["", "community", "4", "4.x.1", "1.2.3.4"] { #expect(SQLCipherVersion(reported: bad) == nil, "\(bad)") }
    }

    @Test("a library that cannot read the format is refused with store-unavailable naming both")
    func unreadableCombinationsAreRefused() throws {
        let old = try #require(SQLCipherVersion(reported: "2.2.1"))
        let error = #expect(throws: StoreError.self) { _ = try CipherSettings(format: .sqlcipher3Raw4096, library: old) }
        #expect(error?.code == .storeUnavailable)
        #expect(error?.message.contains("format 1 (SQLCipher 3, 4096-byte pages, HMAC-SHA1)") == true)
        #expect(error?.message.contains("SQLCipher 2.2.1") == true)
    }

    @Test("a page size other than 4096 is a format no key file records (the benchmarks' only)")
    func otherPageSizeIsUnrecorded() throws {
        var configuration = Database.Configuration()
        #expect(configuration.format == .sqlcipher3Raw4096 && configuration.pageSize == 4096)
        configuration.pageSize = 1024
        #expect(configuration.format.identifier == 0 && configuration.format.pageSize == 1024)
        configuration.pageSize = 4096
        #expect(configuration.format == .sqlcipher3Raw4096)
    }
}
