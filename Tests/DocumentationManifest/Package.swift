// swift-tools-version: 6.2
import PackageDescription

// The Package.swift fragments of README.md and the DocC articles, each where it belongs in an app's manifest.
// scripts/doc-snippets.py (`make doc-snippets`) evaluates this manifest with `swift package dump-package` (it
// type-checks and runs it; nothing is resolved or built: this package has no sources) and checks that every
// product it names is one the root Package.swift declares.

// README.md, "Using it in an app". SwiftPM names a path dependency after its folder unless `name:` says otherwise:
// scripts/doc-snippets.py loads an app with these fragments against a clone in a folder named `clone`.
let readmePackageDependencies: [Package.Dependency] = [
    // snippet.readme-package-manifest
    // Package.swift — the path of your clone, whatever its folder is called; `name:` is what `package:` names
    .package(name: "ProtectedStore", path: "../ProtectedStore"),
    // snippet.hide
]
let readmeAppDependencies: [Target.Dependency] = [
    // snippet.show
    // in your target's dependencies:
    .product(name: "ProtectedStore", package: "ProtectedStore"),
    // snippet.hide
]
let readmeTestDependencies: [Target.Dependency] = [
    // snippet.show
    // in your test target's:
    .product(name: "ProtectedStoreTesting", package: "ProtectedStore"),
    // snippet.end
]

// GettingStarted.md, "Add the dependency" (the same dependency: type-checked here, not added twice).
let gettingStartedPackageDependencies: [Package.Dependency] = [
    // snippet.getting-started-package-manifest
    // your clone's path; its folder may have any name:
    .package(name: "ProtectedStore", path: "../ProtectedStore"),
    // snippet.hide
]
let gettingStartedAppDependencies: [Target.Dependency] = [
    // snippet.show
    // the app target:
    .product(name: "ProtectedStore", package: "ProtectedStore"),
    // snippet.hide
]
let gettingStartedTestDependencies: [Target.Dependency] = [
    // snippet.show
    // the test target:
    .product(name: "ProtectedStoreTesting", package: "ProtectedStore"),
    // snippet.end
]

let package = Package(
    name: "App",
    platforms: [.macOS(.v15)],
    dependencies: readmePackageDependencies,
    targets: [
        .executableTarget(name: "App", dependencies: readmeAppDependencies + gettingStartedAppDependencies),
        .testTarget(name: "ReadmeTests", dependencies: ["App"] + readmeTestDependencies + gettingStartedTestDependencies),
        // TestingWithProtectedStoreTesting.md, "Add the product to your test target".
        // snippet.testing-test-target-manifest
        .testTarget(
            name: "AppTests",
            dependencies: [
                "App", .product(name: "ProtectedStoreTesting", package: "ProtectedStore"),
            ]
        )
        // snippet.end
    ]
)
