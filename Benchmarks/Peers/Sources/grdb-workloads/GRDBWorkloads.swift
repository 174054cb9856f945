import Foundation
import GRDB
import Synchronization

// One workload of the peer benchmark (Benchmarks/BENCHMARKS.md, section 7) on GRDB's DatabasePool over the
// system's plain SQLite, once, printed as one JSON line. `peer-workloads` in ../Package.swift runs the same
// workloads through ProtectedStore; Benchmarks/scripts/peers.py runs the two in alternation. The constants,
// the order of the lookups and the rows written must stay the same on both sides.
//
//   grdb-workloads WORKLOAD [--dir DIR]
//   WORKLOAD: settings | insert_100k | warm_scan_100k | point_read_10k | durable_write_1row
//             | read_p99_during_write | reopen_cold_scan_100k | durable_write_database
//             | durable_write_coordinator | durable_write_coordinator_awaited | main_actor_read_10k
//             | main_actor_read_10k_awaited
//             | open_new_store | peak_rss_100k | first_read_during_write | read_p99_during_two_writes

enum Shape {
    static let rows = 100_000
    static let pointReads = 10_000
    static let durableWrites = 200
    static let durableWarmUpWrites = 20
    static let rowsWrittenDuringReads = 50_000
    /// The rows each of the two stores' writes inserts in `read_p99_during_two_writes`.
    static let rowsWrittenByEachOfTwoWrites = 100_000
    /// The id `first_read_during_write` reads (a row written before).
    static let firstReadID: Int64 = 42
    /// How many times one process measures the short workloads (warm scan, point reads, reopen and cold
    /// scan); it reports their median, which the shared machine's moments of slowness move less.
    static let repeats = 5
    static let value = String(repeating: "v", count: 64)
    static let replacement = String(repeating: "w", count: 64)
    static let createSQL = "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, value TEXT NOT NULL)"
    static let mainActorReads = 10_000
    static let insertSQL = "INSERT INTO items(id, name, value) VALUES (?, ?, ?)"
    static let replaceSQL = "INSERT OR REPLACE INTO items(id, name, value) VALUES (?, ?, ?)"
    static let scanSQL = "SELECT id, name, value FROM items"
    static let lookupSQL = "SELECT name, value FROM items WHERE id = ?"
    static let smallReadSQL = "SELECT value FROM items WHERE id = ?"
}

/// The ids looked up or replaced, in a fixed pseudo-random order (the LCG of StoreWorkloads.pointRead).
struct PseudoRandomIDs {
    private var state: UInt64 = 0x9E37_79B9_7F4A_7C15

    mutating func next() -> Int64 {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Int64(state >> 33) % Int64(Shape.rows)
    }
}

/// A row of `items`, every column decoded.
struct Item: FetchableRecord {
    var id: Int64
    var name: String
    var value: String

    init(row: Row) {
        id = row[0]
        name = row[1]
        value = row[2]
    }
}

/// The two columns a point read returns.
struct NameValue: FetchableRecord {
    var name: String
    var value: String

    init(row: Row) {
        name = row[0]
        value = row[1]
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
}

/// The store's settings, the same as ProtectedStore's defaults: 4 KiB pages, a 32 MiB page cache, WAL,
/// `synchronous = FULL`, temporary tables in memory.
func makePool(_ path: String) throws -> DatabasePool {
    var configuration = Configuration()
    configuration.prepareDatabase { db in
        // Only takes effect on a new file, before its first page is written: as `cipher_page_size` on ours.
        try db.execute(sql: "PRAGMA page_size = 4096")
        try db.execute(sql: "PRAGMA cache_size = -32768")
        try db.execute(sql: "PRAGMA temp_store = MEMORY")
    }
    let pool = try DatabasePool(path: path, configuration: configuration)
    // GRDB sets `synchronous = NORMAL` on the writer after `prepareDatabase` has run (Database.setUpWALMode),
    // so FULL must be set here, once the pool exists. Only the writer commits.
    try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
    return pool
}

/// A `DatabaseQueue` with the same settings, WAL included (a queue's default is a rollback journal): the peer
/// of a synchronous write, `queue.write { }`, which blocks its caller as ours' `Database.transaction` does.
func makeQueue(_ path: String) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.prepareDatabase { db in
        try db.execute(sql: "PRAGMA page_size = 4096")
        try db.execute(sql: "PRAGMA cache_size = -32768")
        try db.execute(sql: "PRAGMA temp_store = MEMORY")
        try db.execute(sql: "PRAGMA journal_mode = WAL")
        try db.execute(sql: "PRAGMA synchronous = FULL")
    }
    return try DatabaseQueue(path: path, configuration: configuration)
}

/// The migrator of ours' store, "create items".
var migrator: DatabaseMigrator {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("create items") { db in try db.execute(sql: Shape.createSQL) }
    return migrator
}

/// The process's peak resident set size (`getrusage`'s `ru_maxrss`, KiB on Linux), in MiB.
func peakResidentMiB() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024
}

/// A `DatabaseQueue` with the 100,000-row table, checked to run WAL with `synchronous = FULL`.
func populatedQueue(_ path: String) throws -> DatabaseQueue {
    let queue = try makeQueue(path)
    try queue.write { db in
        try db.execute(sql: Shape.createSQL)
        try insert(db, 0..<Shape.rows)
    }
    let mode = try queue.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
    let synchronous = try queue.read { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
    precondition(mode == "wal" && synchronous == 2, "the queue runs \(mode ?? "?"), synchronous \(synchronous ?? -1)")
    return queue
}

/// `mainActorReads` one-row reads, each its own synchronous `pool.read { }` on the calling (main) thread;
/// returns a checksum. Not `async`, so the synchronous `read` is the one called.
func synchronousReads(_ pool: DatabasePool) throws -> Int {
    var ids = PseudoRandomIDs()
    var found = 0
    for _ in 0..<Shape.mainActorReads {
        let id = ids.next()
        let value = try pool.read { db in try String.fetchOne(db.cachedStatement(sql: Shape.smallReadSQL), arguments: [id]) }
        found &+= value?.utf8.count ?? 0
    }
    return found
}

/// Durable one-row writes through a synchronous `DatabaseQueue.write`: the median and p99 in ms.
func queueWrites(_ queue: DatabaseQueue) throws -> (Double, Double, Int) {
    let clock = ContinuousClock()
    var ids = PseudoRandomIDs()
    var samples: [Double] = []
    for index in 0..<(Shape.durableWarmUpWrites + Shape.durableWrites) {
        let id = ids.next()
        let start = clock.now
        try queue.write { db in
            try db.cachedStatement(sql: Shape.replaceSQL).execute(arguments: [id, "item-\(id)", Shape.replacement])
        }
        let elapsed = seconds(start.duration(to: clock.now)) * 1000
        if index >= Shape.durableWarmUpWrites { samples.append(elapsed) }
    }
    samples.sort()
    return (percentile(samples, 0.5), percentile(samples, 0.99), samples.count)
}

/// The same durable one-row writes as `queueWrites`, each `writer`'s `async` `write { }` awaited: the p50 and
/// p99 in milliseconds, and how many were timed.
func awaitedWrites(_ writer: some DatabaseWriter) async throws -> (Double, Double, Int) {
    let clock = ContinuousClock()
    var ids = PseudoRandomIDs()
    var samples: [Double] = []
    for index in 0..<(Shape.durableWarmUpWrites + Shape.durableWrites) {
        let id = ids.next()
        let start = clock.now
        try await writer.write { db in
            try db.cachedStatement(sql: Shape.replaceSQL).execute(arguments: [id, "item-\(id)", Shape.replacement])
        }
        let elapsed = seconds(start.duration(to: clock.now)) * 1000
        if index >= Shape.durableWarmUpWrites { samples.append(elapsed) }
    }
    samples.sort()
    return (percentile(samples, 0.5), percentile(samples, 0.99), samples.count)
}

func createTable(_ pool: DatabasePool) throws {
    try pool.write { db in
        try db.execute(sql: "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL, value TEXT NOT NULL)")
    }
}

/// Inserts `ids` through one cached statement, in the caller's transaction.
func insert(_ db: Database, _ ids: Range<Int>) throws {
    let statement = try db.cachedStatement(sql: Shape.insertSQL)
    for id in ids {
        try statement.execute(arguments: [Int64(id), "item-\(id)", Shape.value])
    }
}

/// Reads every row, every column decoded into an `Item`; returns a checksum so nothing is optimised away.
func scan(_ db: Database) throws -> Int {
    var checksum = 0
    var count = 0
    let items = try Item.fetchCursor(db.cachedStatement(sql: Shape.scanSQL))
    while let item = try items.next() {
        checksum &+= Int(item.id) &+ item.name.utf8.count &+ item.value.utf8.count
        count += 1
    }
    precondition(count == Shape.rows, "scan read \(count) rows")
    return checksum
}

/// `pointReads` lookups by primary key in the fixed pseudo-random order, name and value decoded.
func pointReads(_ db: Database) throws -> Int {
    let statement = try db.cachedStatement(sql: Shape.lookupSQL)
    var ids = PseudoRandomIDs()
    var found = 0
    for _ in 0..<Shape.pointReads {
        if let row = try NameValue.fetchOne(statement, arguments: [ids.next()]) {
            found &+= row.name.utf8.count &+ row.value.utf8.count
        }
    }
    return found
}

// The measured regions, by name, so `valgrind --tool=callgrind --toggle-collect='*timed*'` counts them alone.
@inline(never) func timedInsert(_ db: Database) throws { try insert(db, 0..<Shape.rows) }
@inline(never) func timedScan(_ db: Database) throws -> Int { try scan(db) }
@inline(never) func timedPointReads(_ db: Database) throws -> Int { try pointReads(db) }

func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
}

func median(_ samples: [Double]) -> Double {
    let sorted = samples.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// The value at `fraction` of the sorted samples (nearest rank).
func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    precondition(!sorted.isEmpty)
    let rank = Int((fraction * Double(sorted.count)).rounded(.up))
    return sorted[max(0, min(sorted.count - 1, rank - 1))]
}

/// One JSON line: the workload, the side, the measured value and its unit, then extras.
func report(_ workload: String, _ value: Double, _ unit: String, _ extras: [(String, Any)] = []) {
    var fields: [(String, Any)] = [("workload", workload), ("side", "grdb"), ("value", value), ("unit", unit)]
    fields += extras
    let body = fields.map { key, value in
        switch value {
        case let text as String: "\"\(key)\": \"\(text)\""
        default: "\"\(key)\": \(value)"
        }
    }
    print("{" + body.joined(separator: ", ") + "}")
}

@MainActor
func run(_ workload: String, in directory: String) async throws {
    let path = directory + "/store.sqlite"
    let clock = ContinuousClock()

    /// A pool with the 100,000-row table, written the way insert_100k writes it.
    func populatedPool() throws -> DatabasePool {
        let pool = try makePool(path)
        try createTable(pool)
        try pool.write { db in try insert(db, 0..<Shape.rows) }
        return pool
    }

    switch workload {
    case "settings":
        let pool = try populatedPool()
        let settings = try await pool.writeWithoutTransaction { db in
            [
                try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "",
                String(try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1),
                String(try Int.fetchOne(db, sql: "PRAGMA page_size") ?? -1),
                String(try Int.fetchOne(db, sql: "PRAGMA cache_size") ?? -1),
            ]
        }
        let readerCache = try await pool.read { db in try Int.fetchOne(db, sql: "PRAGMA cache_size") ?? -1 }
        let version = try await pool.read { db in try String.fetchOne(db, sql: "SELECT sqlite_version()") ?? "" }
        report(workload, 0, "-", [
            ("journal_mode", settings[0]), ("synchronous", Int(settings[1])!), ("page_size", Int(settings[2])!),
            ("cache_size", Int(settings[3])!), ("reader_cache_size", readerCache), ("sqlite_version", version),
        ])

    case "insert_100k":
        let pool = try makePool(path)
        try createTable(pool)
        let start = clock.now
        try await pool.write { db in try timedInsert(db) }
        report(workload, seconds(start.duration(to: clock.now)), "s")

    case "warm_scan_100k":
        let pool = try populatedPool()
        _ = try await pool.read { db in try scan(db) }  // fills the reader's page cache
        var timings: [Double] = []
        var arrayTimings: [Double] = []
        var checksum = 0
        for _ in 0..<Shape.repeats {
            let start = clock.now
            checksum = try await pool.read { db in try timedScan(db) }
            timings.append(seconds(start.duration(to: clock.now)))
            // The same rows into an array, the counterpart of ours' `rows(_:)`.
            let arrayStart = clock.now
            let items = try await pool.read { db in try Item.fetchAll(db.cachedStatement(sql: Shape.scanSQL)).count }
            arrayTimings.append(seconds(arrayStart.duration(to: clock.now)))
            precondition(items == Shape.rows)
        }
        report(workload, median(timings), "s", [
            ("min", timings.min()!), ("samples", timings), ("array_s", median(arrayTimings)), ("checksum", checksum),
        ])

    case "point_read_10k":
        let pool = try populatedPool()
        _ = try await pool.read { db in try scan(db) }
        var timings: [Double] = []
        var found = 0
        for _ in 0..<Shape.repeats {
            let start = clock.now
            found = try await pool.read { db in try timedPointReads(db) }
            timings.append(seconds(start.duration(to: clock.now)))
        }
        report(workload, median(timings), "s", [("min", timings.min()!), ("samples", timings), ("checksum", found)])

    case "durable_write_1row":
        let (p50, p99, writes) = try await awaitedWrites(try populatedPool())
        report(workload, p50, "ms", [("p99", p99), ("writes", writes)])

    case "read_p99_during_write":
        let pool = try populatedPool()
        _ = try await pool.read { db in try scan(db) }  // the reader's cache is warm, as in an app that has shown a list
        let (latencies, writeSeconds) = try await readsDuringWrite(
            write: { window in
                try await pool.write { db in
                    window.open()
                    defer { window.close() }
                    try insert(db, Shape.rows..<(Shape.rows + Shape.rowsWrittenDuringReads))
                }
            },
            read: { id in
                try await pool.read { db in try String.fetchOne(db.cachedStatement(sql: Shape.smallReadSQL), arguments: [id]) }
            })
        report(workload, percentile(latencies, 0.99), "ms", [
            ("p50", percentile(latencies, 0.5)), ("max", latencies.last!), ("reads", latencies.count),
            ("write_s", writeSeconds),
        ])

    case "reopen_cold_scan_100k":
        var pool = try populatedPool()
        var timings: [Double] = []
        var openTimings: [Double] = []
        var checksum = 0
        for _ in 0..<Shape.repeats {
            try pool.close()
            let start = clock.now
            pool = try makePool(path)
            let opened = clock.now
            checksum = try await pool.read { db in try timedScan(db) }
            let end = clock.now
            timings.append(seconds(start.duration(to: end)))
            openTimings.append(seconds(start.duration(to: opened)))
        }
        try pool.close()
        report(workload, median(timings), "s", [
            ("min", timings.min()!), ("samples", timings), ("open_s", median(openTimings)), ("checksum", checksum),
        ])

    case "durable_write_database", "durable_write_coordinator":
        // The peer of both ours' `Database.transaction` and ours' `coordinator.writeNow`: GRDB's synchronous queue.
        let (p50, p99, writes) = try queueWrites(try populatedQueue(path))
        report(workload, p50, "ms", [("p99", p99), ("writes", writes)])

    case "durable_write_coordinator_awaited":
        // The same writes, each the queue's `async` `write { }` awaited from the main actor, as ours' awaited
        // `coordinator.write`.
        let (p50, p99, writes) = try await awaitedWrites(try populatedQueue(path))
        report(workload, p50, "ms", [("p99", p99), ("writes", writes)])

    case "main_actor_read_10k":
        // 10,000 one-row reads, each its own synchronous `pool.read { }` on the main thread, as a GRDB view
        // model does.
        let pool = try populatedPool()
        _ = try await pool.read { db in try scan(db) }
        var timings: [Double] = []
        var found = 0
        for _ in 0..<Shape.repeats {
            let start = clock.now
            found = try synchronousReads(pool)
            timings.append(seconds(start.duration(to: clock.now)))
        }
        report(workload, median(timings), "s", [("min", timings.min()!), ("samples", timings), ("checksum", found)])

    case "main_actor_read_10k_awaited":
        // The same reads, each GRDB's `async` `pool.read { }` awaited from the main actor.
        let pool = try populatedPool()
        _ = try await pool.read { db in try scan(db) }
        var timings: [Double] = []
        var found = 0
        for _ in 0..<Shape.repeats {
            var ids = PseudoRandomIDs()
            let start = clock.now
            for _ in 0..<Shape.mainActorReads {
                let id = ids.next()
                let value = try await pool.read { db in
                    try String.fetchOne(db.cachedStatement(sql: Shape.smallReadSQL), arguments: [id])
                }
                found &+= value?.utf8.count ?? 0
            }
            timings.append(seconds(start.duration(to: clock.now)))
        }
        report(workload, median(timings), "s", [("min", timings.min()!), ("samples", timings), ("checksum", found)])

    case "open_new_store":
        // A new pool on a new file, the migration run: GRDB's launch → ready. 5 per process, median.
        var timings: [Double] = []
        for index in 0..<Shape.repeats {
            let start = clock.now
            let pool = try makePool(directory + "/new-\(index).sqlite")
            try migrator.migrate(pool)
            timings.append(seconds(start.duration(to: clock.now)))
            try pool.close()
        }
        report(workload, median(timings), "s", [("min", timings.min()!), ("samples", timings)])

    case "peak_rss_100k":
        let pool = try populatedPool()
        let checksum = try await pool.read { db in try scan(db) }
        report(workload, peakResidentMiB(), "MiB", [("checksum", checksum)])

    case "first_read_during_write":
        try await firstReadDuringWrite(path: path)

    case "read_p99_during_two_writes":
        try await readP99DuringTwoWrites(path: path, otherPath: directory + "/other.sqlite")

    default:
        throw UsageError(description: "unknown workload '\(workload)'")
    }
}

/// Thrown by a write to roll it back.
struct RolledBack: Error {}

/// A new pool (new readers) each time; its first read, issued from the main actor once a 50,000-row write is
/// under way, timed on its own. The write is rolled back, so every repeat meets the same store.
@MainActor
func firstReadDuringWrite(path: String) async throws {
    let clock = ContinuousClock()
    var pool = try makePool(path)
    try createTable(pool)
    try await pool.write { db in try insert(db, 0..<Shape.rows) }
    var timings: [Double] = []
    var duringWrite = 0
    for _ in 0..<Shape.repeats {
        try pool.close()
        pool = try makePool(path)
        let writing = pool
        let window = WriteWindow()
        let writer = Task.detached {
            do {
                try await writing.write { db in
                    window.open()
                    defer { window.close() }
                    try insert(db, Shape.rows..<(Shape.rows + Shape.rowsWrittenDuringReads))
                    throw RolledBack()
                }
            } catch is RolledBack {}
        }
        while !window.hasOpened { await Task.yield() }
        let start = clock.now
        let value = try await pool.read { db in
            try String.fetchOne(db.cachedStatement(sql: Shape.smallReadSQL), arguments: [Shape.firstReadID])
        }
        timings.append(seconds(start.duration(to: clock.now)) * 1000)
        if window.isOpen { duringWrite += 1 }
        try await writer.value
        precondition(value?.utf8.count == 64, "the first read found no row")
    }
    try pool.close()
    report("first_read_during_write", median(timings), "ms", [
        ("max", timings.max()!), ("samples", timings), ("returned_during_write", duringWrite),
    ])
}

/// Two pools, each with a long write (100,000 rows in one transaction) at the same time; one-row reads of the
/// first, each its own call from the main actor, back to back, counted while both writes are open.
@MainActor
func readP99DuringTwoWrites(path: String, otherPath: String) async throws {
    let pool = try makePool(path)
    try createTable(pool)
    try await pool.write { db in try insert(db, 0..<Shape.rows) }
    let other = try makePool(otherPath)
    try createTable(other)
    _ = try await pool.read { db in try scan(db) }
    let rows = Shape.rows..<(Shape.rows + Shape.rowsWrittenByEachOfTwoWrites)
    let clock = ContinuousClock()
    let windows = [WriteWindow(), WriteWindow()]
    let writers = [pool, other].enumerated().map { store, writing in
        Task.detached {
            let clock = ContinuousClock()
            let start = clock.now
            try await writing.write { db in
                windows[store].open()
                defer { windows[store].close() }
                try insert(db, rows)
            }
            return seconds(start.duration(to: clock.now))
        }
    }
    while !windows.allSatisfy(\.hasOpened) { await Task.yield() }
    var ids = PseudoRandomIDs()
    var latencies: [Double] = []
    latencies.reserveCapacity(1 << 20)
    // The first read is due the moment both writes are open (as on ours: a main actor that cannot run is charged).
    var issued = windows.compactMap(\.openingTime).max()!
    repeat {
        let id = ids.next()
        let value = try await pool.read { db in
            try String.fetchOne(db.cachedStatement(sql: Shape.smallReadSQL), arguments: [id])
        }
        latencies.append(seconds(issued.duration(to: clock.now)) * 1000)
        precondition(value?.utf8.count == 64, "a read found no row")
        issued = clock.now
    } while windows.allSatisfy(\.isOpen)
    var writeSeconds = 0.0
    for writer in writers { writeSeconds = max(writeSeconds, try await writer.value) }
    guard !latencies.isEmpty else { throw UsageError(description: "no read was issued while both writes ran") }
    latencies.sort()
    report("read_p99_during_two_writes", percentile(latencies, 0.99), "ms", [
        ("p50", percentile(latencies, 0.5)), ("max", latencies.last!), ("reads", latencies.count),
        ("write_s", writeSeconds),
    ])
}

/// The span of the write's transaction during which reads are sampled: opened by the write's first
/// statement, closed after its last insert (before its commit).
final class WriteWindow: Sendable {
    private let state = Atomic<Int>(0)  // 0: not yet open, 1: open, 2: closed
    private let openedAt = Mutex<ContinuousClock.Instant?>(nil)

    func open() {
        openedAt.withLock { $0 = ContinuousClock.now }
        state.store(1, ordering: .releasing)
    }
    /// When the window opened (`nil` before).
    var openingTime: ContinuousClock.Instant? { openedAt.withLock { $0 } }
    func close() { state.store(2, ordering: .releasing) }
    var hasOpened: Bool { state.load(ordering: .acquiring) >= 1 }
    var isOpen: Bool { state.load(ordering: .acquiring) == 1 }
}

/// Runs `write` (50,000 rows in one transaction) while one reader reads one row at a time, each read its
/// own call, back to back. Only reads issued while the write's window is open are counted — from its first
/// statement to its last insert — so reads made after the write (fast on any store) never dilute the
/// figure: when reads wait for the write, the first one waits for all of it, and it is the one counted.
/// Returns the counted reads' latencies in ms, sorted, and how long the write call took in seconds.
func readsDuringWrite(
    write: @escaping @Sendable (WriteWindow) async throws -> Void,
    read: @escaping @Sendable (Int64) async throws -> String?
) async throws -> ([Double], Double) {
    let window = WriteWindow()
    let writer = Task.detached {
        let clock = ContinuousClock()
        let start = clock.now
        try await write(window)
        return seconds(start.duration(to: clock.now))
    }
    let reader = Task.detached {
        let clock = ContinuousClock()
        while !window.hasOpened { await Task.yield() }
        var ids = PseudoRandomIDs()
        var latencies: [Double] = []
        latencies.reserveCapacity(1 << 20)
        while window.isOpen {
            let start = clock.now
            let value = try await read(ids.next())
            latencies.append(seconds(start.duration(to: clock.now)) * 1000)
            precondition(value?.utf8.count == 64, "a read found no row")
        }
        return latencies.sorted()
    }
    let writeSeconds = try await writer.value
    let latencies = try await reader.value
    // The reader starts as soon as the window opens; a write over before it could read is no measurement.
    guard !latencies.isEmpty else { throw UsageError(description: "no read was issued while the write ran") }
    return (latencies, writeSeconds)
}

@main
struct GRDBWorkloads {
    @MainActor
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        var base = NSTemporaryDirectory()
        if let index = arguments.firstIndex(of: "--dir"), index + 1 < arguments.count {
            base = arguments[index + 1]
            arguments.removeSubrange(index...index + 1)
        }
        guard arguments.count == 1 else {
            FileHandle.standardError.write(Data("usage: grdb-workloads WORKLOAD [--dir DIR]\n".utf8))
            exit(2)
        }
        let directory = base + "/peers-grdb-\(UUID().uuidString)"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try await run(arguments[0], in: directory)
        } catch {
            FileHandle.standardError.write(Data("grdb-workloads: \(error)\n".utf8))
            exit(1)
        }
    }
}
