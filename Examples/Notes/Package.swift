// swift-tools-version: 6.2
import PackageDescription

/// The settings the library's own targets use (see the root Package.swift): explicit existentials, imports
/// and Sendable.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .treatWarning("ExplicitSendable", as: .warning),
]

/// An example app on ProtectedStore's data layer: a command-line story (`notes`) and the share extension it
/// starts as a second process (`notes-share-extension`). See README.md.
let package = Package(
    name: "Notes",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "notes", targets: ["notes"]),
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
        // The app. It depends on the extension's target only so that `swift run notes` builds the extension
        // too: the app starts it from the folder of its own executable.
        .executableTarget(
            name: "notes",
            dependencies: [
                "NotesModel", "notes-share-extension",
                .product(name: "ProtectedStore", package: "ProtectedStore"),
                // The simulated device stands in for the operating system's Data Protection; an app on a phone
                // would not import it.
                .product(name: "ProtectedData", package: "ProtectedStore"),
                // `notes simulate`: the app on the library's seeded simulation (an app's tests would import it).
                .product(name: "ProtectedStoreTesting", package: "ProtectedStore"),
            ],
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
