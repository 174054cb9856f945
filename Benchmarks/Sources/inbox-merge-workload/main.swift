import EncryptedSQLite
import Foundation
@_spi(Testing) import ProtectedStore
import SecureKeys

// One inbox merge, once, in a process of its own: for `/usr/bin/time -v` (its maximum resident set size),
// `perf record` and `valgrind`, which the benchmark harness's own threads and allocations would blur.
// The inbox is written first; only the merge is timed, and the process's resident size is read just before
// it (VmRSS) and its peak just after (VmHWM, reset to the current size before the merge starts), so the
// printed delta is the merge's alone.
//
//   inbox-merge-workload small [COUNT]     COUNT records of a location update (10,000 unless told)
//   inbox-merge-workload large [COUNT]     COUNT records of the largest payload, 4 MiB each (40: a 160 MiB inbox)
//   INBOX_MERGE_CACHE_KIB=N    the store's page cache (`Database.Configuration.cacheSizeKiB`, 32,768 unless told).
//   INBOX_MERGE_PAUSE=SECONDS  waits that long between the appends and the merge, for `perf record -p PID`.

struct UsageError: Error, CustomStringConvertible {
    let description: String
}

/// A field of /proc/self/status, in KiB.
func status(_ field: String) -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return -1 }
    for line in text.split(separator: "\n") where line.hasPrefix(field + ":") {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? -1
    }
    return -1
}

func run(_ arguments: [String]) throws {
    guard arguments.count >= 2, ["small", "large"].contains(arguments[1]) else {
        throw UsageError(description: "usage: inbox-merge-workload small|large [COUNT]")
    }
    let large = arguments[1] == "large"
    let count = arguments.count > 2 ? Int(arguments[2]) ?? -1 : (large ? 40 : 10_000)
    guard count > 0 else { throw UsageError(description: "COUNT must be a positive whole number") }

    let directory = NSTemporaryDirectory() + "/protectedstore-inbox-merge-\(UUID().uuidString)"
    try FileManager.default.createDirectory(
        atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let storeKey = try SecureBytes.random(count: 32)
    var configuration = Database.Configuration()
    if let cache = ProcessInfo.processInfo.environment["INBOX_MERGE_CACHE_KIB"].flatMap(Int.init) { configuration.cacheSizeKiB = cache }
    let database = try Database(openingUntrustedFileAt: directory + "/app.sqlite", key: storeKey, configuration: configuration)
    defer { database.close() }
    try DatabaseMigrator.keyValue.migrate(database)
    let inbox = LockedInbox(files: StoreFiles(database: directory + "/app.sqlite"))
    let (publicKey, privateKey) = try inbox.openKeyPair(storeKey: storeKey)
    defer { privateKey.wipe() }

    if large {
        let value = String(repeating: "x", count: InboxRecord.maximumPayloadLength - 64)
        for index in 0..<count { try inbox.append(.put(key: "k\(index)", value: value)) }
    } else {
        try inbox.append(contentsOf: (0..<count).map { .put(key: "location-\($0)", value: "48.8606,2.3376") })
    }
    let inboxBytes = (try FileManager.default.attributesOfItem(atPath: directory + "/app.sqlite.inbox")[.size] as? Int) ?? 0
    if let pause = ProcessInfo.processInfo.environment["INBOX_MERGE_PAUSE"].flatMap(Double.init) {
        FileHandle.standardError.write(Data("pid \(getpid()): merging in \(pause) s\n".utf8))
        Thread.sleep(forTimeInterval: pause)
    }
    // Give back what the appends freed, then start the peak from here (writing 5 to clear_refs resets VmHWM).
    try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
    let before = status("VmRSS")
    let start = ContinuousClock.now
    let report = try inbox.merge(into: database, publicKey: publicKey, privateKey: privateKey, handlers: .keyValue)
    let elapsed = ContinuousClock.now - start
    let peak = status("VmHWM")
    guard report.merged.count == count else { throw UsageError(description: "merged \(report.merged.count) of \(count)") }
    let milliseconds = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3
    print(
        "merged \(count) records (\(inboxBytes) bytes) in \(String(format: "%.0f", milliseconds)) ms; "
            + "resident before \(before / 1024) MiB, peak during the merge \(peak / 1024) MiB, "
            + "peak - before \(String(format: "%.1f", Double(peak - before) / 1024)) MiB")
}

do {
    try run(CommandLine.arguments)
} catch {
    FileHandle.standardError.write(Data("inbox-merge-workload: \(error)\n".utf8))
    exit(2)
}
