// swift-tools-version: 6.1
import PackageDescription

// Kept out of the main build: CI and users who only test never build package-benchmark. Run from this
// folder with `swift package benchmark`.
let package = Package(
    name: "ProtectedStoreBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ProtectedStore", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // Row 2's table and workloads, shared by the wall-clock benchmarks and the instruction counter.
        .target(
            name: "StoreWorkloads",
            dependencies: [
                .product(name: "EncryptedSQLite", package: "ProtectedStore"),
                .product(name: "SecureKeys", package: "ProtectedStore"),
            ]
        ),
        .executableTarget(
            name: "store-workload",
            dependencies: ["StoreWorkloads", "CHeapUsage", .product(name: "EncryptedSQLite", package: "ProtectedStore")]),
        // The ProtectedStore side of the peer benchmark (BENCHMARKS.md, section 7), through the app-level API.
        // Its GRDB side is the separate package Peers/: GRDB's SQLite must never share a process with SQLCipher.
        .executableTarget(
            name: "peer-workloads",
            dependencies: [
                .product(name: "ProtectedStore", package: "ProtectedStore"),
                .product(name: "ProtectedData", package: "ProtectedStore"),
            ]
        ),
        // One inbox merge in a process of its own, for `/usr/bin/time -v`, perf and valgrind (BENCHMARKS.md, §6).
        .executableTarget(
            name: "inbox-merge-workload",
            dependencies: [
                .product(name: "ProtectedStore", package: "ProtectedStore"),
                .product(name: "EncryptedSQLite", package: "ProtectedStore"),
                .product(name: "SecureKeys", package: "ProtectedStore"),
            ]
        ),
        // glibc's heap counter, for the bytes each queued operation holds.
        .target(name: "CHeapUsage"),
        .executableTarget(
            name: "StoreBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                "StoreWorkloads",
                .product(name: "SecureKeys", package: "ProtectedStore"),
            ],
            path: "Benchmarks/StoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "LaunchBenchmarks",
            dependencies: [
                "CHeapUsage",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "ProtectedStore", package: "ProtectedStore"),
                .product(name: "ProtectedData", package: "ProtectedStore"),
                .product(name: "EncryptedSQLite", package: "ProtectedStore"),
                .product(name: "SecureKeys", package: "ProtectedStore"),
            ],
            path: "Benchmarks/LaunchBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "InboxBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "ProtectedStore", package: "ProtectedStore"),
                .product(name: "EncryptedSQLite", package: "ProtectedStore"),
                .product(name: "SecureKeys", package: "ProtectedStore"),
            ],
            path: "Benchmarks/InboxBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ]
)
