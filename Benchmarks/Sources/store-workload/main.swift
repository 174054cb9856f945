import CHeapUsage
import EncryptedSQLite
import Foundation
import StoreWorkloads

// One row-2 workload, once, for instruction counting: the wall-clock benchmarks on a shared 2-core machine
// move by ±20 %, while `valgrind --tool=callgrind` counts the same instructions every run. Only the
// functions named `measure…` are counted (`--toggle-collect='*measure*'`); set-up is not.
//
//   store-workload WORKLOAD KEYING [--page-size N] [--cache-kib N] [--statement-cache N] [--count N]
//   WORKLOAD: insert | scan-cold | scan-warm | point-reads | distinct-statements | in-lists
//   KEYING: raw-key | unencrypted
//
// `distinct-statements` and `in-lists` measure memory, not instructions: they run `--count` queries of
// distinct SQL text (20,000 `SELECT count(*) + N …` by default; 500 `IN (?, …)` lists of lengths 1…500 for
// `in-lists`) through the connection's statement cache and print the heap that stays in use (glibc's
// mallinfo2), so the cache's bound (`--statement-cache`, the default 100 when absent) shows in bytes.

@inline(never) func measureInsert(_ database: Database) throws { try Workload.insertAll(database) }
@inline(never) func measureScan(_ database: Database) throws -> Int { try Workload.scan(database) }
@inline(never) func measurePointReads(_ database: Database) throws -> Int { try Workload.pointRead(database) }

struct UsageError: Error, CustomStringConvertible {
    let description: String
}

func run(_ arguments: [String]) throws {
    guard arguments.count >= 2 else {
        throw UsageError(description: "usage: store-workload insert|scan-cold|scan-warm|point-reads|distinct-statements|in-lists raw-key|unencrypted [--page-size N] [--cache-kib N] [--statement-cache N] [--count N]")
    }
    let keying: Keying
    switch arguments[1] {
    case "raw-key": keying = .rawKey
    case "unencrypted": keying = .unencrypted
    default: throw UsageError(description: "unknown keying '\(arguments[1])': expected raw-key or unencrypted")
    }
    var configuration = Database.Configuration()
    var count: Int?
    var options = arguments.dropFirst(2).makeIterator()
    while let option = options.next() {
        guard let value = options.next().flatMap(Int.init) else {
            throw UsageError(description: "\(option) needs a whole number")
        }
        switch option {
        case "--page-size": configuration.pageSize = value
        case "--cache-kib": configuration.cacheSizeKiB = value
        case "--statement-cache": configuration.statementCacheCapacity = value
        case "--count": count = value
        default: throw UsageError(description: "unknown option '\(option)'")
        }
    }
    switch arguments[0] {
    case "insert":
        let directory = try Workload.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try keying.open(directory + "/store.sqlite", configuration)
        try Workload.createTable(database)
        try measureInsert(database)
    case "scan-cold", "scan-warm", "point-reads":
        let path = try Workload.populated(keying, configuration)
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let database = try keying.open(path, configuration)
        switch arguments[0] {
        case "scan-cold": _ = try measureScan(database)
        case "scan-warm":
            _ = try Workload.scan(database)
            _ = try measureScan(database)
        default:
            _ = try Workload.scan(database)
            _ = try measurePointReads(database)
        }
    case "distinct-statements", "in-lists":
        let directory = try Workload.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try keying.open(directory + "/store.sqlite", configuration)
        try Workload.createTable(database)
        let inLists = arguments[0] == "in-lists"
        let total = count ?? (inLists ? 500 : 20_000)
        // One query first, so the connection's own first allocations are not counted.
        _ = try database.scalar("SELECT count(*) FROM items")
        let before = heap_bytes_in_use()
        for index in 0..<total {
            if inLists {
                let values = (0...index).map { DatabaseValue.integer(Int64($0)) }
                let sql = "SELECT count(*) FROM items WHERE id IN (" + Array(repeating: "?", count: index + 1).joined(separator: ", ") + ")"
                _ = try database.scalar(sql, values)
            } else {
                _ = try database.scalar("SELECT count(*) + \(index) FROM items WHERE id = ?", [.integer(Int64(index))])
            }
        }
        let after = heap_bytes_in_use()
        let grown = Int(after) - Int(before)
        print("\(arguments[0]) \(total) statement cache \(configuration.statementCacheCapacity): heap grew \(grown) bytes (\(String(format: "%.1f", Double(grown) / 1_048_576)) MiB)")
    default: throw UsageError(description: "unknown workload '\(arguments[0])'")
    }
}

do {
    try run(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("store-workload: \(error)\n".utf8))
    exit(2)
}
