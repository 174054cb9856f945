import Benchmark
import CHeapUsage
import EncryptedSQLite
import Foundation
import ProtectedData
@_spi(Testing) import ProtectedStore
import SecureKeys

/// One device with stores of several sizes, built once and kept under the temporary directory (a 1 GB store
/// takes a while to write), reused by later runs.
enum Fixture {
    static let root = NSTemporaryDirectory() + "/protectedstore-launch-bench-v1"
    static let passcode = "bench-passcode"

    static func storePath(_ name: String) -> String { root + "/" + name + ".sqlite" }

    /// Sets up the device and the stores when missing. Argon2id uses the minimal cost so that the
    /// unlock benchmark measures everything but Argon2id (measured on its own below).
    static func prepare() throws {
        if !FileManager.default.fileExists(atPath: root + "/device/state.json") {
            try? FileManager.default.removeItem(atPath: root)
            _ = try KeybagDevice.setUp(
                in: root, passcode: SecureBytes(utf8: passcode), configuration: .init(kdf: .minimal))
        }
        let device = try KeybagDevice(bootingFrom: root)
        try device.unlock(passcode: SecureBytes(utf8: passcode))
        for (name, bytes) in [("1mb", 1 << 20), ("100k-rows", -100_000), ("100mb", 100 << 20), ("1gb", 1 << 30)] where !FileManager.default.fileExists(atPath: storePath(name)) {
            let key = try device.createStoreKey(forStoreAt: storePath(name), protectionClass: .complete)
            let database = try Database(openingUntrustedFileAt: storePath(name), key: key)
            try DatabaseMigrator.keyValue.migrate(database)
            let rows = bytes < 0 ? -bytes : bytes / 1024
            let value = String(repeating: "v", count: bytes < 0 ? 40 : 1000)
            let insert = try database.prepare("INSERT INTO entries(key, value) VALUES (?, ?)")
            for batch in stride(from: 0, to: rows, by: 50_000) {
                try database.transaction {
                    for index in batch..<min(batch + 50_000, rows) { try insert.execute([.text("key-\(index)"), .text(value)]) }
                }
            }
            try database.checkpoint()
            database.close()
        }
    }

    @MainActor
    static func controller(store: String, keys: any DataController.KeySource, queueCapacity: Int = 200_000) -> DataController {
        DataController(
            configuration: .init(store: StoreConfiguration(path: storePath(store)), queueCapacity: queueCapacity), keys: keys)
    }
}

let benchmarks: @Sendable () -> Void = {
    try! Fixture.prepare()
    let unlocked = try! KeybagDevice(bootingFrom: Fixture.root)
    try! unlocked.unlock(passcode: SecureBytes(utf8: Fixture.passcode))
    let locked = try! KeybagDevice(bootingFrom: Fixture.root)  // booted, never unlocked

    let latency = Benchmark.Configuration(
        metrics: [.wallClock], timeUnits: .microseconds, warmupIterations: 5, maxDuration: .seconds(5), maxIterations: 300)

    // 3. Launch phase 1: creating the controller and starting the launch, until it returns. It must not
    // depend on the store's size or on whether its key is available.
    for (store, label) in [("1mb", "1 MB"), ("100mb", "100 MB"), ("1gb", "1 GB")] {
        for (keys, availability) in [(unlocked, "key available"), (locked, "key unavailable")] {
            Benchmark("Launch phase 1: \(label) store, \(availability)", configuration: latency) { @MainActor benchmark in
                benchmark.startMeasurement()
                let controller = Fixture.controller(store: store, keys: keys)
                controller.launch(LaunchOptions(reason: .location))
                benchmark.stopMeasurement()
                blackHole(controller)
                await controller.waitUntilIdle()
                await controller.terminate()
            }
        }
    }

    // 4. Unlock → store attached → queue drained, for a 100,000-row store with 10 operations waiting.
    // Argon2id runs at its minimal cost here (about 0.05 ms); its real cost is the next benchmark.
    Benchmark("Unlock → attached → drained: 100k-row store, 10 queued operations", configuration: latency) { @MainActor benchmark in
        let device = try KeybagDevice(bootingFrom: Fixture.root)
        let controller = Fixture.controller(store: "100k-rows", keys: device)
        controller.launch(LaunchOptions(reason: .location))
        await controller.waitUntilIdle()
        for index in 0..<10 { try controller.submit("op-\(index)") { _ in } }
        benchmark.startMeasurement()
        try device.unlock(passcode: SecureBytes(utf8: Fixture.passcode))
        await controller.waitUntilIdle()
        benchmark.stopMeasurement()
        precondition(controller.phase == .ready && controller.queuedOperationCount == 0)
        await controller.terminate()
    }

    Benchmark(
        "Unlock: Argon2id at the default cost (ops 2, 64 MiB)",
        configuration: .init(metrics: [.wallClock], timeUnits: .milliseconds, warmupIterations: 2, maxDuration: .seconds(5), maxIterations: 50)
    ) { benchmark in
        let deviceKey = try SecureBytes.random(count: 32)
        let (keybag, _) = try Keybag.create(passcode: SecureBytes(utf8: "1234"), deviceKey: deviceKey, kdf: .default)
        benchmark.startMeasurement()
        blackHole(try keybag.unlock(passcode: SecureBytes(utf8: "1234"), deviceKey: deviceKey))
        benchmark.stopMeasurement()
    }

    // 5. The operation queue: 100,000 operations submitted while protected data is unavailable, then the
    // unlock drains them (the measurement covers the drain, including the attach of a 1 MB store).
    Benchmark(
        "Drain 100,000 queued operations (unlock → all run)",
        configuration: .init(metrics: [.wallClock, .mallocCountTotal], timeUnits: .milliseconds, warmupIterations: 1, maxDuration: .seconds(10), maxIterations: 20)
    ) { @MainActor benchmark in
        let device = try KeybagDevice(bootingFrom: Fixture.root)
        let controller = Fixture.controller(store: "1mb", keys: device)
        controller.launch(LaunchOptions(reason: .location))
        await controller.waitUntilIdle()
        var ran = 0
        for index in 0..<100_000 { try controller.submit("op-\(index)") { _ in ran += 1 } }
        benchmark.startMeasurement()
        try device.unlock(passcode: SecureBytes(utf8: Fixture.passcode))
        await controller.waitUntilIdle()
        benchmark.stopMeasurement()
        precondition(ran == 100_000)
        await controller.terminate()
    }

    // Memory per queued operation: the heap in use after the submits minus before (glibc's mallinfo2),
    // divided by the count, with the closure's capture and the label included.
    let bytesPerOperation = BenchmarkMetric.custom("Heap bytes per queued operation", polarity: .prefersSmaller, useScalingFactor: false)
    Benchmark(
        "Enqueue 100,000 operations while locked",
        configuration: .init(metrics: [.wallClock, .mallocCountTotal, bytesPerOperation], timeUnits: .milliseconds, warmupIterations: 1, maxDuration: .seconds(10), maxIterations: 20)
    ) { @MainActor benchmark in
        let device = try KeybagDevice(bootingFrom: Fixture.root)
        let controller = Fixture.controller(store: "1mb", keys: device)
        controller.launch(LaunchOptions(reason: .location))
        await controller.waitUntilIdle()
        let heapBefore = heap_bytes_in_use()
        benchmark.startMeasurement()
        for index in 0..<100_000 { try controller.submit("op-\(index)") { _ in } }
        benchmark.stopMeasurement()
        precondition(controller.queuedOperationCount == 100_000)
        benchmark.measurement(bytesPerOperation, (heap_bytes_in_use() - heapBefore) / 100_000)
        await controller.terminate()
    }
}

