// swift-tools-version: 6.1
import PackageDescription

// Kept out of the main build: CI and users who only test never build package-benchmark. Run from this
// folder with `swift package benchmark`.
let package = Package(
    name: "ProtectedStoreBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "ProtectedStore", path: ".."),
        .package(url: "https://github.com/ordo-one/package-benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "StoreBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "EncryptedSQLite", package: "ProtectedStore"),
                .product(name: "SecureKeys", package: "ProtectedStore"),
            ],
            path: "Benchmarks/StoreBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        .executableTarget(
            name: "LaunchBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "ProtectedStore", package: "ProtectedStore"),
                .product(name: "EncryptedSQLite", package: "ProtectedStore"),
                .product(name: "SecureKeys", package: "ProtectedStore"),
            ],
            path: "Benchmarks/LaunchBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
        .executableTarget(
            name: "InboxBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "package-benchmark"),
                .product(name: "ProtectedStore", package: "ProtectedStore"),
                .product(name: "EncryptedSQLite", package: "ProtectedStore"),
                .product(name: "SecureKeys", package: "ProtectedStore"),
            ],
            path: "Benchmarks/InboxBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "package-benchmark")]
        ),
    ]
)
