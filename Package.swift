// swift-tools-version: 6.2
import PackageDescription

/// Settings every Swift target shares: Swift 6 language mode is the tools-version default; these make
/// existential use, imports and Sendable explicit, as swift-log does: every public type says whether it is
/// `Sendable` (the `ExplicitSendable` diagnostic group).
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .treatWarning("ExplicitSendable", as: .warning),
]

let package = Package(
    name: "ProtectedStore",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "SecureKeys", targets: ["SecureKeys"]),
        .library(name: "EncryptedSQLite", targets: ["EncryptedSQLite"]),
        .library(name: "ProtectedData", targets: ["ProtectedData"]),
        .library(name: "ProtectedStore", targets: ["ProtectedStore"]),
        .library(name: "TPMKeys", targets: ["TPMKeys"]),
        .library(name: "ProtectedStoreTesting", targets: ["ProtectedStoreTesting"]),
        .library(name: "ProtectedStoreHarness", targets: ["ProtectedStoreHarness"]),
        .library(name: "LinuxDevice", targets: ["LinuxDevice"]),
        .executable(name: "protected-store", targets: ["protected-store"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/pointfreeco/swift-clocks", from: "1.0.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.0"),
        // `make docs` only: a command plugin is built when it is invoked, never by `swift build`/`swift test`.
        // 1.5 for the combined archive of every module (`--enable-experimental-combined-documentation`).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // The C boundary: system libraries found through pkg-config (apt: libsqlcipher-dev, libsodium-dev,
        // libsystemd-dev, libtss2-dev, libedit-dev).
        .systemLibrary(
            name: "CSQLCipher",
            pkgConfig: "sqlcipher",
            providers: [.apt(["libsqlcipher-dev"])]
        ),
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .systemLibrary(
            name: "CSystemd",
            pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]
        ),
        .systemLibrary(
            name: "CTSS2",
            pkgConfig: "tss2-esys",
            providers: [.apt(["libtss2-dev"])]
        ),
        .systemLibrary(
            name: "CEditLine",
            pkgConfig: "libedit",
            providers: [.apt(["libedit-dev"])]
        ),

        // The SQLite VFS that reports a store's writes to the simulated disk (power-cut simulation only).
        .target(name: "CDiskVFS", dependencies: ["CSQLCipher"]),

        // Layers, each importing only the ones above it (README.md, "What is here").
        // The one error type an app catches, below every layer that throws it: the SQL layer's failures are
        // `StoreError`s, so an app catches one type inside `write { }` and outside it.
        .target(name: "StoreErrors", swiftSettings: strictSettings),
        // The helpers every layer shares to coordinate threads: a value behind a lock.
        .target(name: "StoreConcurrency", swiftSettings: strictSettings),
        // The disk as the simulators see it, below the key layer: the model that forgets unsynced writes (power
        // cuts), the plans that fail the N-th file-system call, and the path and POSIX helpers they share.
        .target(
            name: "DiskModel",
            dependencies: ["StoreConcurrency", .product(name: "SystemPackage", package: "swift-system")],
            swiftSettings: strictSettings),
        .target(
            name: "SecureKeys",
            dependencies: [
                "StoreErrors", "StoreConcurrency", "DiskModel", "CSodium",
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings),
        .target(
            name: "EncryptedSQLite",
            dependencies: [
                "StoreErrors", "StoreConcurrency", "CSQLCipher", "CDiskVFS", "DiskModel", "SecureKeys",
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings),
        .target(
            name: "ProtectedData",
            dependencies: [
                "StoreErrors", "StoreConcurrency", "DiskModel", "SecureKeys",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),

        // The device key sealed by a TPM 2.0 (tpm2-tss): a `DeviceKeyStore` beside the device's file one.
        .target(name: "TPMKeys", dependencies: ["CTSS2", "SecureKeys", "ProtectedData"], swiftSettings: strictSettings),
        // The real device on a Linux desktop: the session's lock from systemd-logind over sd-bus.
        .target(
            name: "LinuxDevice",
            dependencies: [
                "ProtectedData", "SecureKeys", "StoreConcurrency", "TPMKeys", "CSystemd",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),

        .executableTarget(
            name: "protected-store",
            dependencies: [
                "SecureKeys", "StoreConcurrency", "DiskModel", "EncryptedSQLite", "ProtectedData", "ProtectedStore", "ProtectedStoreHarness", "CEditLine", "TPMKeys", "LinuxDevice",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),

        .target(
            name: "ProtectedStore",
            dependencies: [
                "StoreErrors", "StoreConcurrency", "DiskModel", "SecureKeys", "EncryptedSQLite", "ProtectedData",
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),

        .target(
            name: "ProtectedStoreHarness",
            dependencies: [
                "ProtectedStore", "ProtectedData", "SecureKeys", "StoreConcurrency", "DiskModel",
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),

        .target(
            name: "ProtectedStoreTesting",
            dependencies: [
                "ProtectedStore", "ProtectedData", "SecureKeys", "DiskModel",
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),

        // What every test target shares: a temporary directory that cleans up after itself, hex helpers.
        .target(name: "TestSupport", path: "Tests/TestSupport", swiftSettings: strictSettings),
        .testTarget(name: "SecureKeysTests", dependencies: ["SecureKeys", "StoreConcurrency", "DiskModel", "TestSupport"], swiftSettings: strictSettings),
        .testTarget(name: "StoreConcurrencyTests", dependencies: ["StoreConcurrency"], swiftSettings: strictSettings),
        .testTarget(
            name: "EncryptedSQLiteTests", dependencies: ["EncryptedSQLite", "SecureKeys", "DiskModel", "TestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ProtectedStoreTests",
            dependencies: [
                "ProtectedStore", "ProtectedData", "EncryptedSQLite", "SecureKeys", "StoreConcurrency", "DiskModel", "TestSupport",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ProtectedStoreHarnessTests",
            dependencies: [
                "ProtectedStoreHarness", "ProtectedStore", "DiskModel", "TestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ProtectedStoreTestingTests",
            dependencies: ["ProtectedStoreTesting", "ProtectedStore", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CommandLineTests",
            dependencies: [
                "protected-store", "TestSupport", "ProtectedStore", "ProtectedData", "SecureKeys", "DiskModel", "ProtectedStoreHarness",
            ],
            swiftSettings: strictSettings
        ),
        // The code of every ```swift block in README.md and the DocC articles, between `// snippet.NAME` markers,
        // run against the simulated device (scripts/doc-snippets.py, `make doc-snippets`, checks that each block is
        // a region). `MemberImportVisibility`: a file's imports are exactly its block's, so a block that shows
        // `import ProtectedStore` alone compiles with that alone.
        .testTarget(
            name: "DocumentationSnippetTests",
            dependencies: [
                "ProtectedStore", "ProtectedData", "ProtectedStoreTesting",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings + [.enableUpcomingFeature("MemberImportVisibility")]
        ),
        // A private system bus and session bus per test (dbus-daemon), with python3-dbusmock's logind and
        // gnome_screensaver templates on them.
        .testTarget(
            name: "LinuxDeviceTests",
            dependencies: [
                "LinuxDevice", "ProtectedData", "ProtectedStore", "ProtectedStoreTesting", "SecureKeys", "TestSupport",
                "protected-store",
            ],
            exclude: ["Fixtures"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TPMKeysTests", dependencies: ["TPMKeys", "ProtectedData", "SecureKeys", "DiskModel", "TestSupport"],
            swiftSettings: strictSettings),
        .testTarget(
            name: "ProtectedDataTests",
            dependencies: [
                "ProtectedData", "SecureKeys", "StoreConcurrency", "DiskModel", "TestSupport", .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "SystemPackage", package: "swift-system"),
            ],
            swiftSettings: strictSettings
        ),
    ]
)
