// swift-tools-version: 6.2
import PackageDescription

/// The settings the library's own targets use (see the root Package.swift): explicit existentials, imports
/// and Sendable.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .treatWarning("ExplicitSendable", as: .warning),
]

/// An example app on ProtectedStore's data layer: what the app and its share extension share, and the
/// extension, a second process that writes to the locked inbox (`notes-share-extension`).
let package = Package(
    name: "Notes",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "notes-share-extension", targets: ["notes-share-extension"]),
    ],
    dependencies: [
        .package(name: "ProtectedStore", path: "../.."),
    ],
    targets: [
        // What the app and its extension share: the record, the inbox change, the schema and the store's place.
        .target(
            name: "NotesModel",
            dependencies: [.product(name: "ProtectedStore", package: "ProtectedStore")],
            swiftSettings: strictSettings
        ),
        // The share extension: the store's files and nothing else — no device, no key.
        .executableTarget(
            name: "notes-share-extension",
            dependencies: ["NotesModel", .product(name: "ProtectedStore", package: "ProtectedStore")],
            swiftSettings: strictSettings
        ),
    ]
)
