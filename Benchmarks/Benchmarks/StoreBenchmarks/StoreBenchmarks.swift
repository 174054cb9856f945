import Benchmark
import EncryptedSQLite
import Foundation
import SecureKeys

/// A store of `rows` rows in a fresh temporary directory, keyed either way.
private func makeStore(rows: Int, keyedBy open: (String) throws -> Database) throws -> String {
    let directory = NSTemporaryDirectory() + "/protectedstore-bench-\(UUID().uuidString)"
    try SecureFile.createDirectory(at: directory)
    let path = directory + "/store.sqlite"
    let database = try open(path)
    try database.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT)")
    try database.transaction {
        for index in 0..<rows { try database.execute("INSERT INTO items(name) VALUES (?)", [.text("item-\(index)")]) }
    }
    try database.checkpoint()
    database.close()
    return path
}

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock], warmupIterations: 3, maxDuration: .seconds(5), maxIterations: 500)

    // 1. Store open: raw 32-byte key (no KDF) against a passphrase (SQLCipher 3's 64,000-iteration PBKDF2).
    // An open includes the first read that authenticates page 1, as Database.init always does.
    let key = SecureBytes.random(count: 32)
    let passphrase = SecureBytes(utf8: "benchmark passphrase, not secret")
    let rawPath = try! makeStore(rows: 1000) { try Database(path: $0, key: key) }
    let passphrasePath = try! makeStore(rows: 1000) { try Database(path: $0, passphrase: passphrase) }

    Benchmark("Open: raw key", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try Database(path: rawPath, key: key))
        }
    }

    Benchmark("Open: passphrase (PBKDF2, 64,000 iterations)", configuration: configuration) { benchmark in
        for _ in benchmark.scaledIterations {
            blackHole(try Database(path: passphrasePath, passphrase: passphrase))
        }
    }
}
