// swift-tools-version: 6.1
import PackageDescription

// libFuzzer targets for every parser of untrusted bytes. Kept out of the main build (they have no `main`:
// libFuzzer supplies it); build and run them with `make fuzz` from the top level, or:
//   swift build -c release -Xswiftc -sanitize=fuzzer,address
//   .build/release/FuzzKeybag -max_total_time=60 Corpus/keybag
let fuzzTargets = ["FuzzKeybag", "FuzzStoreKeyFile", "FuzzInboxRecords", "FuzzScenarioLanguage", "FuzzAgentWire"]

let package = Package(
    name: "ProtectedStoreFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "ProtectedStore", path: "..")],
    targets: [.target(name: "FuzzDriver")] + fuzzTargets.map { name in
        .executableTarget(
            name: name,
            dependencies: [
                "FuzzDriver",
                .product(name: "SecureKeys", package: "ProtectedStore"),
                .product(name: "ProtectedData", package: "ProtectedStore"),
                .product(name: "ProtectedStore", package: "ProtectedStore"),
                .product(name: "ProtectedStoreHarness", package: "ProtectedStore"),
            ])
    }
)
