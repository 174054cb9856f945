@_spi(Baseline) public import EncryptedSQLite
internal import Foundation
public import SecureKeys

/// How a benchmark database is opened: the store's way (raw key), SQLCipher's passphrase way, or plain
/// SQLite — the baseline each encrypted figure is divided by. Every other setting is the store's default.
public enum Keying: CaseIterable {
    case rawKey, passphrase, unencrypted

    public static let key = try! SecureBytes.random(count: 32)  // out of guarded memory stops the benchmark
    public static let passphraseBytes = try! SecureBytes(utf8: "benchmark passphrase, not secret")

    public var label: String {
        switch self {
        case .rawKey: "encrypted (raw key)"
        case .passphrase: "encrypted (passphrase, PBKDF2 64,000 iterations)"
        case .unencrypted: "unencrypted"
        }
    }

    public func open(_ path: String, _ configuration: Database.Configuration = .init()) throws -> Database {
        switch self {
        case .rawKey: try Database(openingUntrustedFileAt: path, key: Self.key, configuration: configuration)
        case .passphrase: try Database(openingUntrustedFileAt: path, passphrase: Self.passphraseBytes, configuration: configuration)
        case .unencrypted: try Database(unencryptedPath: path, configuration: configuration)
        }
    }
}

/// Row 2's table: 100,000 rows of an integer key, a short name and a 64-byte value (about 10 MB with
/// 4 KiB pages), written in one transaction as an app's import or sync would.
public enum Workload {
    public static let rows = 100_000
    public static let pointReads = 10_000
    public static let value = String(repeating: "v", count: 64)

    public static func directory() throws -> String {
        let directory = NSTemporaryDirectory() + "/protectedstore-bench-\(UUID().uuidString)"
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return directory
    }

    public static func createTable(_ database: Database) throws {
        try database.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, value TEXT NOT NULL)")
    }

    /// Fills the table: 100,000 inserts through one reused statement in one transaction.
    public static func insertAll(_ database: Database) throws {
        let insert = try database.prepare("INSERT INTO items(id, name, value) VALUES (?, ?, ?)")
        try database.transaction {
            for id in 0..<rows { try insert.execute([.integer(Int64(id)), .text("item-\(id)"), .text(value)]) }
        }
    }

    /// A database of `rows` rows, checkpointed and closed.
    public static func populated(_ keying: Keying, _ configuration: Database.Configuration = .init()) throws -> String {
        let path = try directory() + "/store.sqlite"
        let database = try keying.open(path, configuration)
        try createTable(database)
        try insertAll(database)
        try database.checkpoint()
        database.close()
        return path
    }

    /// Reads every row through the statement API (one column each), as a list view would.
    public static func scan(_ database: Database) throws -> Int {
        let select = try database.cachedStatement("SELECT id, name, value FROM items")
        try select.bind([])
        var count = 0
        while try select.step() {
            if case .text = select.value(at: 2) { count += 1 }
        }
        return count
    }

    /// `pointReads` lookups by primary key in a fixed pseudo-random order.
    public static func pointRead(_ database: Database) throws -> Int {
        let select = try database.cachedStatement("SELECT name, value FROM items WHERE id = ?")
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var found = 0
        for _ in 0..<pointReads {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            try select.bind([.integer(Int64(state >> 33) % Int64(rows))])
            if try select.step() { found += 1 }
        }
        return found
    }
}
