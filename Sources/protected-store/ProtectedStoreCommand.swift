import ArgumentParser

/// `protected-store`: simulates a device and an app's launch around an encrypted store.
@main
struct ProtectedStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protected-store",
        abstract: "An encrypted SQLite store that survives launches while the device is locked.",
        subcommands: [Demo.self, Shell.self, Run.self, Simulate.self]
    )
}
