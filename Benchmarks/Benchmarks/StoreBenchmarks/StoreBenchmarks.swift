import Benchmark
import Foundation
import SecureKeys
import StoreWorkloads

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock], warmupIterations: 3, maxDuration: .seconds(5), maxIterations: 500)
    let heavy = Benchmark.Configuration(
        metrics: [.wallClock], timeUnits: .microseconds, warmupIterations: 3, maxDuration: .seconds(15), maxIterations: 80)

    // 1. Store open, including the first read that authenticates page 1 (Database.init always does it).
    for keying in Keying.allCases {
        let path = try! Workload.populated(keying)
        Benchmark("Open: \(keying.label)", configuration: configuration) { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(try keying.open(path))
            }
        }
    }

    // 2. Inserts, scans and point reads, encrypted with the store's raw key against unencrypted.
    for keying in [Keying.rawKey, .unencrypted] {
        Benchmark("Insert 100k rows, one transaction: \(keying.label)", configuration: heavy) { benchmark in
            let directory = try Workload.directory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let database = try keying.open(directory + "/store.sqlite")
            try Workload.createTable(database)
            benchmark.startMeasurement()
            try Workload.insertAll(database)
            benchmark.stopMeasurement()
            database.close()
        }

        let path = try! Workload.populated(keying)
        // Cold: a new connection, so every page is read from the file (the OS cache) and, when encrypted,
        // authenticated and decrypted. The open is outside the measurement.
        Benchmark("Full scan, cold page cache: \(keying.label)", configuration: heavy) { benchmark in
            let database = try keying.open(path)
            benchmark.startMeasurement()
            blackHole(try Workload.scan(database))
            benchmark.stopMeasurement()
            database.close()
        }

        nonisolated(unsafe) let warm = try! keying.open(path)  // used by one benchmark at a time
        _ = try! Workload.scan(warm)
        Benchmark("Full scan, warm page cache: \(keying.label)", configuration: heavy) { benchmark in
            blackHole(try Workload.scan(warm))
        }
        Benchmark("Point reads ×10,000, warm page cache: \(keying.label)", configuration: heavy) { benchmark in
            blackHole(try Workload.pointRead(warm))
        }
    }
}
