// swift-tools-version: 6.2
import PackageDescription

/// The settings the library's own targets use (see the root Package.swift): explicit existentials, imports
/// and Sendable.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .treatWarning("ExplicitSendable", as: .warning),
]

/// An app's own source of keys, written outside the package against the public API only: a
/// `KeyAvailabilityMonitor` and `StoreKeyProvider` over a passphrase the user types (Argon2id), with the lock in
/// the app's hands. No simulated device. See README.md.
let package = Package(
    name: "PassphraseKeys",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "PassphraseKeySource", targets: ["PassphraseKeySource"]),
        .executable(name: "passphrase-keys", targets: ["passphrase-keys"]),
    ],
    dependencies: [
        .package(name: "ProtectedStore", path: "../.."),
    ],
    targets: [
        // The key source: what an app on a platform without Data Protection would write.
        .target(
            name: "PassphraseKeySource",
            dependencies: [
                .product(name: "ProtectedStore", package: "ProtectedStore"),
                // Argon2id, key wrapping and the store key file format, for the source's own key material.
                .product(name: "SecureKeys", package: "ProtectedStore"),
            ],
            swiftSettings: strictSettings
        ),
        // A story that launches a DataController on that source, locked and unlocked, checks each step, and runs
        // the key-source conformance suite on the source.
        .executableTarget(
            name: "passphrase-keys",
            dependencies: [
                "PassphraseKeySource", .product(name: "ProtectedStore", package: "ProtectedStore"),
                // The key-source conformance suite, run on the source at the story's end.
                .product(name: "ProtectedStoreTesting", package: "ProtectedStore"),
            ],
            swiftSettings: strictSettings
        ),
    ]
)
