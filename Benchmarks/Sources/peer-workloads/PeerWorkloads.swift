import Foundation
import ProtectedData
import ProtectedStore
import Synchronization

// One workload of the peer benchmark (Benchmarks/BENCHMARKS.md, section 7) through ProtectedStore's app-level
// API, once, printed as one JSON line: a DataController launched with a key source (the simulated device,
// unlocked) until its phase is `ready`, then its StoreCoordinator's `read { }` / `write { }`. The GRDB side
// is `grdb-workloads` in Peers/ (a package of its own: GRDB's SQLite and SQLCipher must never share a
// process); Benchmarks/scripts/peers.py runs the two in alternation. The constants, the order of the
// lookups and the rows written must stay the same on both sides.
//
//   peer-workloads WORKLOAD [--dir DIR]
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
struct Item {
    var id: Int64
    var name: String
    var value: String

    /// The current row of a statement running `Shape.scanSQL`.
    init(_ statement: Statement) {
        // The typed accessors: one SQLite call per integer, two per text (text and length). GRDB's `row[i]`
        // for these non-optional columns asks for the type (its NULL check), then the text, then `strlen`s it.
        guard let name = statement.string(at: 1), let value = statement.string(at: 2)
        else { preconditionFailure("a row of items with a NULL name or value") }
        self.id = statement.int64(at: 0)
        self.name = name
        self.value = value
    }

    /// A row returned by `Database.rows`.
    init(_ row: Row) {
        guard let id = row[0].int64, let name = row[1].string, let value = row[2].string else {
            preconditionFailure("a row of items that is not (integer, text, text)")
        }
        self.id = id
        self.name = name
        self.value = value
    }
}

struct UsageError: Error, CustomStringConvertible {
    let description: String
}

struct LaunchError: Error, CustomStringConvertible {
    let description: String
}

/// The app: an unlocked simulated device (the key source) and the store, launched through a DataController
/// with the store's default settings (4 KiB pages, a 32 MiB page cache, WAL, `synchronous = FULL`).
@MainActor
final class App {
    let device: KeybagDevice
    var store: StoreConfiguration
    private var controller: DataController?

    init(directory: String) throws {
        // Argon2id at its minimal cost: the device is set up before anything is measured, and no workload
        // unlocks it again.
        device = try KeybagDevice.setUp(
            in: directory + "/device", passcode: SecureBytes(utf8: "peer-benchmark"), configuration: .init(kdf: .minimal))
        store = StoreConfiguration(path: directory + "/store.sqlite", migrator: Self.migrator)
    }

    /// One migration, "create items".
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create items") { database in
            try database.execute(Shape.createSQL)
        }
        return migrator
    }

    /// Launches a new controller and returns its coordinator once the phase is `ready`, as an app following
    /// `phases()` would.
    func launch() async throws -> StoreCoordinator {
        let controller = DataController(configuration: .init(store: store), keys: device)
        self.controller = controller
        let phases = controller.phases()
        controller.launch()
        for await phase in phases {
            switch phase {
            case .ready:
                guard let coordinator = controller.coordinator else { throw LaunchError(description: "ready without a coordinator") }
                return coordinator
            case .failed(let error): throw error
            case .terminated, .waitingForProtectedData: throw LaunchError(description: "the store did not attach: \(phase)")
            case .notLaunched, .launching: continue
            }
        }
        throw LaunchError(description: "the phases ended before the store was ready")
    }

    /// Terminates the app and returns once its store is closed (checkpointed, its connection gone): what
    /// `terminate()` awaits.
    func terminate(_ coordinator: StoreCoordinator) async {
        await controller?.terminate()
        controller = nil
        let stillOpen = await coordinator.isOpen
        precondition(!stillOpen, "terminate() returned with the store open")
    }
}

/// Inserts `ids` through one cached statement, in the caller's transaction.
func insert(_ database: Database, _ ids: Range<Int>) throws {
    let statement = try database.cachedStatement(Shape.insertSQL)
    for id in ids {
        try statement.execute([.integer(Int64(id)), .text("item-\(id)"), .text(Shape.value)])
    }
}

/// Reads every row, every column decoded into an `Item`; returns a checksum so nothing is optimised away.
func scan(_ database: Database) throws -> Int {
    var checksum = 0
    var count = 0
    let statement = try database.cachedStatement(Shape.scanSQL)
    try statement.bind([])
    while try statement.step() {
        let item = Item(statement)
        checksum &+= Int(item.id) &+ item.name.utf8.count &+ item.value.utf8.count
        count += 1
    }
    precondition(count == Shape.rows, "scan read \(count) rows")
    return checksum
}

/// `pointReads` lookups by primary key in the fixed pseudo-random order, name and value decoded.
func pointReads(_ database: Database) throws -> Int {
    let statement = try database.cachedStatement(Shape.lookupSQL)
    var ids = PseudoRandomIDs()
    var found = 0
    for _ in 0..<Shape.pointReads {
        try statement.bind([.integer(ids.next())])
        if try statement.step(), case .text(let name) = statement.value(at: 0), case .text(let value) = statement.value(at: 1) {
            found &+= name.utf8.count &+ value.utf8.count
        }
    }
    return found
}

// The measured regions, by name, so `valgrind --tool=callgrind --toggle-collect='*timed*'` counts them alone.
@inline(never) func timedInsert(_ database: Database) throws { try insert(database, 0..<Shape.rows) }
@inline(never) func timedScan(_ database: Database) throws -> Int { try scan(database) }
@inline(never) func timedPointReads(_ database: Database) throws -> Int { try pointReads(database) }

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
func report(_ workload: String, _ value: Double, _ unit: String, _ extras: [(String, any Sendable)] = []) {
    var fields: [(String, any Sendable)] = [("workload", workload), ("side", "ours"), ("value", value), ("unit", unit)]
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
    let app = try App(directory: directory)
    let clock = ContinuousClock()

    /// The store with the 100,000-row table, written the way insert_100k writes it.
    func populated() async throws -> StoreCoordinator {
        let coordinator = try await app.launch()
        try await coordinator.write { database in try insert(database, 0..<Shape.rows) }
        return coordinator
    }

    switch workload {
    case "settings":
        let coordinator = try await populated()
        // The writer's pragmas: it is the connection that commits (`synchronous` matters there), as on GRDB's side.
        let settings = try await coordinator.write { database in
            try [
                "PRAGMA journal_mode", "PRAGMA synchronous", "PRAGMA page_size", "PRAGMA cache_size",
                "PRAGMA cipher_page_size", "SELECT sqlite_version()", "PRAGMA cipher_version",
            ].map { sql in
                switch try database.scalar(sql) {
                case .integer(let integer): String(integer)
                case .text(let text): text
                default: "?"
                }
            }
        }
        report(workload, 0, "-", [
            ("journal_mode", settings[0]), ("synchronous", Int(settings[1]) ?? -1), ("page_size", Int(settings[2]) ?? -1),
            ("cache_size", Int(settings[3]) ?? -1), ("cipher_page_size", Int(settings[4]) ?? -1),
            ("sqlite_version", settings[5]), ("cipher_version", settings[6]),
        ])

    case "insert_100k":
        let coordinator = try await app.launch()
        let start = clock.now
        try await coordinator.write { database in try timedInsert(database) }
        report(workload, seconds(start.duration(to: clock.now)), "s")

    case "warm_scan_100k":
        let coordinator = try await populated()
        _ = try await coordinator.read { database in try scan(database) }  // the page cache holds the table
        var timings: [Double] = []
        var arrayTimings: [Double] = []
        var checksum = 0
        for _ in 0..<Shape.repeats {
            let start = clock.now
            checksum = try await coordinator.read { database in try timedScan(database) }
            timings.append(seconds(start.duration(to: clock.now)))
            // The same rows through the convenience API an app reaches for first, `rows(_:)`, into an array.
            let arrayStart = clock.now
            let items = try await coordinator.read { database in try database.rows(Shape.scanSQL).map(Item.init).count }
            arrayTimings.append(seconds(arrayStart.duration(to: clock.now)))
            precondition(items == Shape.rows)
        }
        report(workload, median(timings), "s", [
            ("min", timings.min()!), ("samples", timings), ("array_s", median(arrayTimings)), ("checksum", checksum),
        ])

    case "point_read_10k":
        let coordinator = try await populated()
        _ = try await coordinator.read { database in try scan(database) }
        var timings: [Double] = []
        var found = 0
        for _ in 0..<Shape.repeats {
            let start = clock.now
            found = try await coordinator.read { database in try timedPointReads(database) }
            timings.append(seconds(start.duration(to: clock.now)))
        }
        report(workload, median(timings), "s", [("min", timings.min()!), ("samples", timings), ("checksum", found)])

    case "durable_write_1row", "durable_write_coordinator", "durable_write_coordinator_awaited":
        // The same writes; GRDB's side differs: its pool's async `write` for the first, its synchronous
        // `DatabaseQueue.write` for the second, its queue's async `write` for the third. Ours is the awaited
        // `write` (a hop to the writer's thread and back), except for `durable_write_coordinator`: `writeNow`, on
        // the main thread, as GRDB's synchronous write.
        let coordinator = try await populated()
        let synchronous = workload == "durable_write_coordinator"
        var ids = PseudoRandomIDs()
        var samples: [Double] = []
        for index in 0..<(Shape.durableWarmUpWrites + Shape.durableWrites) {
            let id = ids.next()
            let start = clock.now
            if synchronous {
                try coordinator.writeNow { database in
                    try database.execute(Shape.replaceSQL, [.integer(id), .text("item-\(id)"), .text(Shape.replacement)])
                }
            } else {
                try await coordinator.write { database in
                    try database.execute(Shape.replaceSQL, [.integer(id), .text("item-\(id)"), .text(Shape.replacement)])
                }
            }
            let elapsed = seconds(start.duration(to: clock.now)) * 1000
            if index >= Shape.durableWarmUpWrites { samples.append(elapsed) }
        }
        samples.sort()
        report(workload, percentile(samples, 0.5), "ms", [
            ("p99", percentile(samples, 0.99)), ("writes", samples.count),
        ])

    case "read_p99_during_write":
        let coordinator = try await populated()
        _ = try await coordinator.read { database in try scan(database) }  // warm, as in an app that has shown a list
        let (latencies, writeSeconds) = try await readsDuringWrite(
            write: { window in
                try await coordinator.write { database in
                    window.open()
                    defer { window.close() }
                    try insert(database, Shape.rows..<(Shape.rows + Shape.rowsWrittenDuringReads))
                }
            },
            read: { id in
                try await coordinator.read { database in try database.scalar(Shape.smallReadSQL, [.integer(id)])?.string }
            })
        report(workload, percentile(latencies, 0.99), "ms", [
            ("p50", percentile(latencies, 0.5)), ("max", latencies.last!), ("reads", latencies.count),
            ("write_s", writeSeconds),
        ])

    case "reopen_cold_scan_100k":
        var coordinator = try await populated()
        var timings: [Double] = []
        var openTimings: [Double] = []
        var checksum = 0
        for _ in 0..<Shape.repeats {
            await app.terminate(coordinator)
            let start = clock.now
            coordinator = try await app.launch()
            let opened = clock.now
            checksum = try await coordinator.read { database in try timedScan(database) }
            let end = clock.now
            timings.append(seconds(start.duration(to: end)))
            openTimings.append(seconds(start.duration(to: opened)))
        }
        await app.terminate(coordinator)
        report(workload, median(timings), "s", [
            ("min", timings.min()!), ("samples", timings), ("open_s", median(openTimings)), ("checksum", checksum),
        ])

    case "durable_write_database":
        // The store's `Database` opened directly (no device, no coordinator): what a write costs below the
        // app-level API, against GRDB's synchronous `DatabaseQueue.write`.
        let database = try Database(openingUntrustedFileAt: directory + "/direct.sqlite", key: SecureBytes.random(count: 32))
        defer { database.close() }
        try database.execute(Shape.createSQL)
        try database.transaction { try insert(database, 0..<Shape.rows) }
        var ids = PseudoRandomIDs()
        var samples: [Double] = []
        for index in 0..<(Shape.durableWarmUpWrites + Shape.durableWrites) {
            let id = ids.next()
            let start = clock.now
            try database.transaction {
                try database.execute(Shape.replaceSQL, [.integer(id), .text("item-\(id)"), .text(Shape.replacement)])
            }
            let elapsed = seconds(start.duration(to: clock.now)) * 1000
            if index >= Shape.durableWarmUpWrites { samples.append(elapsed) }
        }
        samples.sort()
        report(workload, percentile(samples, 0.5), "ms", [("p99", percentile(samples, 0.99)), ("writes", samples.count)])

    case "main_actor_read_10k", "main_actor_read_10k_awaited":
        // 10,000 one-row reads from the main actor, each its own read call, as a view model does: synchronous
        // (`readNow`, on the main thread, as GRDB's `read`), or awaited (on a reader's thread, two hops).
        let coordinator = try await populated()
        _ = try await coordinator.read { database in try scan(database) }
        let awaited = workload == "main_actor_read_10k_awaited"
        var timings: [Double] = []
        var found = 0
        for _ in 0..<Shape.repeats {
            var ids = PseudoRandomIDs()
            let start = clock.now
            for _ in 0..<Shape.mainActorReads {
                let id = ids.next()
                let value = awaited
                    ? try await coordinator.read { database in try database.scalar(Shape.smallReadSQL, [.integer(id)])?.string }
                    : try coordinator.readNow { database in try database.scalar(Shape.smallReadSQL, [.integer(id)])?.string }
                found &+= value?.utf8.count ?? 0
            }
            timings.append(seconds(start.duration(to: clock.now)))
        }
        report(workload, median(timings), "s", [("min", timings.min()!), ("samples", timings), ("checksum", found)])

    case "open_new_store":
        // Launch → ready on a new store (its key made and wrapped, the file created, the migration run), the
        // device already set up and unlocked; 5 new stores per process, median.
        var timings: [Double] = []
        for index in 0..<Shape.repeats {
            app.store = StoreConfiguration(path: directory + "/new-\(index).sqlite", migrator: App.migrator)
            let start = clock.now
            let coordinator = try await app.launch()
            timings.append(seconds(start.duration(to: clock.now)))
            await app.terminate(coordinator)
        }
        report(workload, median(timings), "s", [("min", timings.min()!), ("samples", timings)])

    case "peak_rss_100k":
        // The process's peak resident size after insert_100k's write and a scan of every row (the writer's and
        // a reader's page caches both filled), in MiB.
        let coordinator = try await populated()
        let checksum = try await coordinator.read { database in try scan(database) }
        report(workload, peakResidentMiB(), "MiB", [("checksum", checksum)])

    case "first_read_during_write":
        // A new controller (new readers) each time; its first read, issued from the main actor once a 50,000-row
        // write is under way, timed on its own. The write is rolled back, so every repeat meets the same store.
        var coordinator = try await populated()
        var timings: [Double] = []
        var duringWrite = 0
        for _ in 0..<Shape.repeats {
            await app.terminate(coordinator)
            coordinator = try await app.launch()
            let writing = coordinator
            let window = WriteWindow()
            let writer = Task.detached {
                do {
                    try await writing.write { database in
                        window.open()
                        defer { window.close() }
                        try insert(database, Shape.rows..<(Shape.rows + Shape.rowsWrittenDuringReads))
                        throw RolledBack()
                    }
                } catch is RolledBack {}
            }
            while !window.hasOpened { await Task.yield() }
            let start = clock.now
            let value = try await coordinator.read { database in
                try database.scalar(Shape.smallReadSQL, [.integer(Shape.firstReadID)])?.string
            }
            timings.append(seconds(start.duration(to: clock.now)) * 1000)
            if window.isOpen { duringWrite += 1 }
            try await writer.value
            precondition(value?.utf8.count == 64, "the first read found no row")
        }
        await app.terminate(coordinator)
        report(workload, median(timings), "ms", [
            ("max", timings.max()!), ("samples", timings), ("returned_during_write", duringWrite),
        ])

    case "read_p99_during_two_writes":
        // Two stores, each with a long write (100,000 rows in one transaction) at the same time; one-row reads of
        // the first, each its own call from the main actor, back to back, counted while both writes are open.
        let coordinator = try await populated()
        let otherDirectory = directory + "/other"
        try FileManager.default.createDirectory(
            atPath: otherDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let other = try App(directory: otherDirectory)
        let otherCoordinator = try await other.launch()
        _ = try await coordinator.read { database in try scan(database) }
        let rows = Shape.rows..<(Shape.rows + Shape.rowsWrittenByEachOfTwoWrites)
        let (latencies, writeSeconds) = try await readsDuringTwoWrites(
            write: { store, window in
                try await [coordinator, otherCoordinator][store].write { database in
                    window.open()
                    defer { window.close() }
                    try insert(database, rows)
                }
            },
            read: { id in
                try await coordinator.read { database in try database.scalar(Shape.smallReadSQL, [.integer(id)])?.string }
            })
        await app.terminate(coordinator)
        await other.terminate(otherCoordinator)
        report(workload, percentile(latencies, 0.99), "ms", [
            ("p50", percentile(latencies, 0.5)), ("max", latencies.last!), ("reads", latencies.count),
            ("write_s", writeSeconds),
        ])

    default:
        throw UsageError(description: "unknown workload '\(workload)'")
    }
}

/// The process's peak resident set size (`getrusage`'s `ru_maxrss`, KiB on Linux), in MiB.
func peakResidentMiB() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024
}

/// Thrown by a write to roll it back.
struct RolledBack: Error {}

/// Runs two writes (store 0 and store 1) at once while the main actor reads one row at a time, each read its
/// own call, back to back. The first read counts from the moment both writes' windows are open, the others
/// only when issued while both still are: a read that waits for a write — for a thread the write holds, even
/// to be issued — is counted with all its wait. Returns the counted reads' latencies
/// in ms, sorted, and how long the slower write call took in seconds.
@MainActor
func readsDuringTwoWrites(
    write: @escaping @Sendable (Int, WriteWindow) async throws -> Void,
    read: (Int64) async throws -> String?
) async throws -> ([Double], Double) {
    let clock = ContinuousClock()
    let windows = [WriteWindow(), WriteWindow()]
    let writers = (0..<2).map { store in
        Task.detached {
            let clock = ContinuousClock()
            let start = clock.now
            try await write(store, windows[store])
            return seconds(start.duration(to: clock.now))
        }
    }
    while !windows.allSatisfy(\.hasOpened) { await Task.yield() }
    var ids = PseudoRandomIDs()
    var latencies: [Double] = []
    latencies.reserveCapacity(1 << 20)
    // The first read is due the moment both writes are open: when the writes hold the threads the main actor
    // needs, it cannot even issue it, and that wait is the read's too.
    var issued = windows.compactMap(\.openingTime).max()!
    repeat {
        let value = try await read(ids.next())
        latencies.append(seconds(issued.duration(to: clock.now)) * 1000)
        precondition(value?.utf8.count == 64, "a read found no row")
        issued = clock.now
    } while windows.allSatisfy(\.isOpen)
    var writeSeconds = 0.0
    for writer in writers { writeSeconds = max(writeSeconds, try await writer.value) }
    guard !latencies.isEmpty else { throw UsageError(description: "no read was issued while both writes ran") }
    return (latencies.sorted(), writeSeconds)
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
struct PeerWorkloads {
    @MainActor
    static func main() async {
        var arguments = Array(CommandLine.arguments.dropFirst())
        var base = NSTemporaryDirectory()
        if let index = arguments.firstIndex(of: "--dir"), index + 1 < arguments.count {
            base = arguments[index + 1]
            arguments.removeSubrange(index...index + 1)
        }
        guard arguments.count == 1 else {
            FileHandle.standardError.write(Data("usage: peer-workloads WORKLOAD [--dir DIR]\n".utf8))
            exit(2)
        }
        let directory = base + "/peers-ours-\(UUID().uuidString)"
        do {
            try FileManager.default.createDirectory(
                atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try await run(arguments[0], in: directory)
        } catch {
            FileHandle.standardError.write(Data("peer-workloads: \(error)\n".utf8))
            exit(1)
        }
    }
}
