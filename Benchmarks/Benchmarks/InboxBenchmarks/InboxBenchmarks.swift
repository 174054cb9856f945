import Benchmark
import EncryptedSQLite
import Foundation
@_spi(Testing) import ProtectedStore
import SecureKeys

/// A fresh store with its inbox key, in a new temporary directory.
struct InboxStore {
    let directory = NSTemporaryDirectory() + "/protectedstore-inbox-bench-\(UUID().uuidString)"
    let storeKey = try! SecureBytes.random(count: 32)  // a benchmark fixture: out of guarded memory stops it
    let database: Database
    let inbox: LockedInbox
    let publicKey: [UInt8]
    let privateKey: SecureBytes

    init() throws {
        try FileManager.default.createDirectory(
            atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        database = try Database(openingUntrustedFileAt: directory + "/app.sqlite", key: storeKey)
        try DatabaseMigrator.keyValue.migrate(database)
        inbox = LockedInbox(files: StoreFiles(database: directory + "/app.sqlite"))
        (publicKey, privateKey) = try inbox.openKeyPair(storeKey: storeKey)
    }

    func remove() {
        database.close()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock], timeUnits: .milliseconds, warmupIterations: 1, maxDuration: .seconds(20), maxIterations: 10)

    // 6. Seal and append 10,000 records, each fsynced before its append returns (as a caller is promised).
    Benchmark("Inbox: seal + append 10,000 records (fsync each)", configuration: configuration) { benchmark in
        let store = try InboxStore()
        benchmark.startMeasurement()
        for index in 0..<10_000 { try store.inbox.append(.put(key: "location-\(index)", value: "48.8606,2.3376")) }
        benchmark.stopMeasurement()
        store.remove()
    }

    Benchmark("Inbox: seal + append 10,000 records as one batch (one fsync)", configuration: configuration) { benchmark in
        let store = try InboxStore()
        let changes = (0..<10_000).map { InboxEntry.Change.put(key: "location-\($0)", value: "48.8606,2.3376") }
        benchmark.startMeasurement()
        try store.inbox.append(contentsOf: changes)
        benchmark.stopMeasurement()
        store.remove()
    }

    // The common case: every record applies, in one transaction (no savepoint).
    Benchmark("Inbox: merge 10,000 records (open, apply in one transaction, truncate)", configuration: configuration) { benchmark in
        let store = try InboxStore()
        try store.inbox.append(contentsOf: (0..<10_000).map { .put(key: "location-\($0)", value: "48.8606,2.3376") })
        benchmark.startMeasurement()
        let report = try store.inbox.merge(
            into: store.database, publicKey: store.publicKey, privateKey: store.privateKey,
            handlers: .keyValue)
        benchmark.stopMeasurement()
        precondition(report.merged.count == 10_000)
        store.remove()
    }

    // Issue 26: a merge reads records a window at a time (pread), never the whole file, so its peak memory is
    // about the largest record plus a constant whatever the inbox's size: 40 records of 4 MiB (a 160 MiB inbox).
    // Before, the merge read the whole file and kept every sealed record too: about 5x the inbox (853 MB).
    Benchmark(
        "Inbox: merge a 160 MiB inbox (40 records of 4 MiB): peak memory",
        configuration: .init(
            metrics: [.wallClock, .peakMemoryResident, .peakMemoryResidentDelta], timeUnits: .milliseconds,
            warmupIterations: 0, maxDuration: .seconds(60), maxIterations: 3)
    ) { benchmark in
        let store = try InboxStore()
        let value = String(repeating: "x", count: InboxRecord.maximumPayloadLength - 64)
        for index in 0..<40 { try store.inbox.append(.put(key: "k\(index)", value: value)) }
        benchmark.startMeasurement()
        let report = try store.inbox.merge(
            into: store.database, publicKey: store.publicKey, privateKey: store.privateKey, handlers: .keyValue)
        benchmark.stopMeasurement()
        precondition(report.merged.count == 40)
        store.remove()
    }

    // One record of a kind the app does not know, in the middle: the batch is rolled back and applied again with
    // a savepoint per record, the unknown one quarantined.
    Benchmark("Inbox: merge 10,000 records, one of an unknown kind (a savepoint per record, one quarantined)", configuration: configuration) {
        benchmark in
        let store = try InboxStore()
        try store.inbox.append(contentsOf: (0..<5_000).map { .put(key: "location-\($0)", value: "48.8606,2.3376") })
        try store.inbox.append(UnknownChange(note: "from a newer version"))
        try store.inbox.append(contentsOf: (5_000..<9_999).map { .put(key: "location-\($0)", value: "48.8606,2.3376") })
        benchmark.startMeasurement()
        let report = try store.inbox.merge(
            into: store.database, publicKey: store.publicKey, privateKey: store.privateKey, handlers: .keyValue)
        benchmark.stopMeasurement()
        precondition(report.merged.count == 9_999 && report.quarantined.count == 1)
        store.remove()
    }
}

/// A change no handler of the benchmark's app applies.
struct UnknownChange: InboxChange {
    static let kind = "unknown"
    static let schemaVersion = 1
    var note: String
}
