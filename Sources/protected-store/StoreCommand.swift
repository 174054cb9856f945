import ArgumentParser

extension ProtectedStoreCommand {
    /// `store …`: the state directory's store as a whole — copies of it, its format.
    struct Store: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Work on a state directory's store as a whole: export it, migrate its format.",
            subcommands: [Export.self, Migrate.self])
    }
}
