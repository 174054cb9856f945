import TestSupport
import Foundation
import SecureKeys
import Testing

@_spi(Baseline) @testable import EncryptedSQLite

@Suite("Encrypted database")
struct DatabaseTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }
    var path: String { directory.file("store.sqlite") }

    /// The code of the `StoreError` that `body` throws, `nil` when it throws none (another error fails the test).
    func code(of body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> StoreError.Code? {
        thrownError(StoreError.self, sourceLocation: sourceLocation, by: body)?.code
    }

    func fileBytes(_ path: String) -> [UInt8] {
        FileManager.default.contents(atPath: path).map(Array.init) ?? []
    }

    func makeStore(rows: Int = 3) throws {
        let database = try Database(path: path, key: key)
        try database.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, data BLOB, score REAL)")
        try database.transaction {
            for index in 0..<rows {
                try database.execute(
                    "INSERT INTO items(name, data, score) VALUES (?, ?, ?)",
                    [.text("item-\(index)"), .blob([UInt8(index % 256), 0xff]), .real(Double(index) / 2)])
            }
        }
        database.close()
    }

    @Test("the linked library is SQLCipher and reports its version")
    func linksSQLCipher() throws {
        let database = try Database(path: path, key: key)
        #expect(database.cipherVersion.hasPrefix("3.4"))
    }

    @Test("rows written and closed read back after reopening with the same key, with their types")
    func roundTrip() throws {
        try makeStore()
        let database = try Database(path: path, key: key)
        let rows = try database.rows("SELECT id, name, data, score FROM items ORDER BY id")
        #expect(rows.count == 3)
        #expect(rows[1]["name"] == .text("item-1"))
        #expect(rows[1]["data"] == .blob([1, 0xff]))
        #expect(rows[1]["score"] == .real(0.5))
        #expect(rows[2][0].int64 == 3)
        #expect(try database.scalar("SELECT count(*) FROM items WHERE score > ?", [.real(0.2)]) == .integer(2))
        #expect(try database.scalar("PRAGMA journal_mode") == .text("wal"))
    }

    @Test("a wrong key fails at open with wrong-key, and the file is left byte for byte as it was")
    func wrongKeyFailsAtOpen() throws {
        try makeStore()
        let before = fileBytes(path)
        #expect(code { _ = try Database(path: path, key: try SecureBytes.random(count: 32)) } == .wrongKey)
        #expect(fileBytes(path) == before)
        #expect(try Database(path: path, key: key).scalar("SELECT count(*) FROM items") == .integer(3))
    }

    @Test("a file that is not a database fails with wrong-key (SQLCipher cannot tell the two apart)")
    func notADatabase() throws {
        _ = FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x41, count: 8192))
        #expect(code { _ = try Database(path: path, key: key) } == .wrongKey)
        #expect(fileBytes(path) == [UInt8](repeating: 0x41, count: 8192))
    }

    @Test("a missing file is not created when createIfMissing is off: store-unavailable")
    func missingFileIsUnavailable() {
        var configuration = Database.Configuration()
        configuration.createIfMissing = false
        #expect(code { _ = try Database(path: path, key: key, configuration: configuration) } == .storeUnavailable)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test("a key that is not 32 bytes is refused as misuse")
    func shortKeyIsMisuse() {
        #expect(code { _ = try Database(path: path, key: try SecureBytes.random(count: 16)) } == .misuse)
    }

    @Test("no file in the directory contains a stored value or the SQLite plaintext header")
    func noPlaintextOnDisk() throws {
        let markers = ["MARKER-alpha-8f3e2", "MARKER-bravo-77c1d", "MARKER-charlie-0a9b4"]
        let database = try Database(path: path, key: key)
        try database.execute("CREATE TABLE notes(body TEXT)")
        for marker in markers {
            try database.execute("INSERT INTO notes(body) VALUES (?)", [.text(String(repeating: marker, count: 20))])
        }
        // Inspect while the WAL and shared-memory files exist, then again after close and checkpoint.
        func assertNoPlaintext() throws {
            let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
            #expect(names.contains("store.sqlite"))
            for name in names {
                let contents = fileBytes(directory.file(name))
                for needle in markers + ["SQLite format 3"] {
                    #expect(!contents.contains(Array(needle.utf8)), "\(needle) found in \(name)")
                }
            }
        }
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        try assertNoPlaintext()
        try database.checkpoint()
        database.close()
        try assertNoPlaintext()
    }

    @Test("the unencrypted baseline is plain SQLite: its header and values are on disk, with the store's page size")
    func unencryptedBaselineIsPlaintext() throws {
        let plainPath = directory.file("baseline.sqlite")
        let database = try Database(unencryptedPath: plainPath)
        try database.execute("CREATE TABLE notes(body TEXT)")
        try database.execute("INSERT INTO notes(body) VALUES (?)", [.text("MARKER-plain-5d1c")])
        try database.checkpoint()
        #expect(try database.scalar("PRAGMA page_size") == .integer(4096))
        database.close()
        let contents = fileBytes(plainPath)
        #expect(contents.starts(with: Array("SQLite format 3".utf8)))
        #expect(contents.contains(Array("MARKER-plain-5d1c".utf8)))
        // A key does not open it: SQLCipher reads the plaintext header as a page that fails to decrypt.
        #expect(code { _ = try Database(path: plainPath, key: key) } == .wrongKey)
    }

    @Test("a new store and its WAL are readable by their owner only (0600)")
    func newStoreIsPrivate() throws {
        let database = try Database(path: path, key: key)
        try database.execute("CREATE TABLE t(x)")
        for file in [path, path + "-wal", path + "-shm"] {
            let mode = try (FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as! NSNumber).intValue
            #expect(mode == 0o600, "\(file)")
        }
    }

    @Test("the store uses 4096-byte pages")
    func pageSizeIs4096() throws {
        try makeStore(rows: 200)
        let database = try Database(path: path, key: key)
        try database.checkpoint()
        #expect(try database.scalar("PRAGMA cipher_page_size") == .text("4096"))
        #expect(fileBytes(path).count % 4096 == 0)
    }

    @Test("a transaction commits when its body returns and rolls back when it throws")
    func transactions() throws {
        try makeStore(rows: 0)
        let database = try Database(path: path, key: key)
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try database.transaction {
                try database.execute("INSERT INTO items(name) VALUES (?)", [.text("rolled-back")])
                throw Abort()
            }
        }
        #expect(!database.isInTransaction)
        try database.transaction { try database.execute("INSERT INTO items(name) VALUES (?)", [.text("kept")]) }
        #expect(try database.rows("SELECT name FROM items").map { $0[0] } == [.text("kept")])
    }

    @Test("a unique violation is reported as constraint, naming the statement but not its values")
    func constraintViolation() throws {
        try makeStore(rows: 1)
        let database = try Database(path: path, key: key)
        do {
            try database.execute("INSERT INTO items(name) VALUES (?)", [.text("item-0")])
            Issue.record("expected a constraint error")
        } catch let error as StoreError {
            #expect(error.code == .constraint)
            #expect(error.sql == "INSERT INTO items(name) VALUES (?)")
            #expect(!error.description.contains("item-0"))
        }
    }

    @Test("rekey: afterwards only the new key opens the store, with every row intact")
    func rekey() throws {
        try makeStore(rows: 50)
        let newKey = try SecureBytes.random(count: 32)
        do {
            let database = try Database(path: path, key: key)
            try database.rekey(to: newKey)
            #expect(try database.scalar("SELECT count(*) FROM items") == .integer(50))
            #expect(try database.scalar("PRAGMA journal_mode") == .text("wal"))
        }
        #expect(code { _ = try Database(path: path, key: key) } == .wrongKey)
        let reopened = try Database(path: path, key: newKey)
        #expect(try reopened.scalar("SELECT count(*) FROM items") == .integer(50))
        #expect(try reopened.integrityCheck() == ["ok"])
    }

    @Test("a flipped bit in a data page fails its HMAC and is reported as store-damaged; the file is not changed")
    func bitFlipIsCorrupt() throws {
        try makeStore(rows: 2000)
        do {
            let database = try Database(path: path, key: key)
            try database.checkpoint()
        }
        var bytes = fileBytes(path)
        #expect(bytes.count > 3 * 4096)
        bytes[2 * 4096 + 100] ^= 0x04
        _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
        let database = try Database(path: path, key: key)
        #expect(code { _ = try database.integrityCheck() } == .storeDamaged)
        #expect(fileBytes(path) == bytes)
        // An ordinary SQL error is still reported as such, not as damage.
        #expect(code { try database.execute("SELECT * FROM no_such_table") } == .sqliteError)
    }

    @Test("using a closed database fails with closed")
    func closedDatabase() throws {
        let database = try Database(path: path, key: key)
        database.close()
        database.close()
        #expect(code { try database.execute("SELECT 1") } == .closed)
    }

    @Test("binding the wrong number of arguments is misuse")
    func wrongArgumentCount() throws {
        try makeStore(rows: 0)
        let database = try Database(path: path, key: key)
        #expect(code { try database.execute("INSERT INTO items(name) VALUES (?)", []) } == .misuse)
    }
}
