// swift-tools-version: 6.1
import PackageDescription

// GRDB over the system's plain SQLite, for the side-by-side peer benchmark (Benchmarks/BENCHMARKS.md, section 7).
// A package of its own, never a target of ../Package.swift: GRDB links libsqlite3 and ProtectedStore links
// SQLCipher, and both export the same sqlite3_* symbols, so the two must never share a process.
let package = Package(
    name: "ProtectedStorePeers",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        .executableTarget(
            name: "grdb-workloads",
            dependencies: [.product(name: "GRDB", package: "GRDB.swift")]
        ),
    ]
)
