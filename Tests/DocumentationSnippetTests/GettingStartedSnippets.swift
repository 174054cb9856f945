import Testing

// The code of Sources/ProtectedStore/Documentation.docc/GettingStarted.md (scripts/doc-snippets.py checks that
// each region below is, byte for byte, a block of the article).

// snippet.getting-started-describe
import ProtectedStore
// snippet.hide

/// GettingStarted.md, run in the article's order on a simulated device.
@MainActor
@Suite("GettingStarted.md", .serialized, .timeLimit(.minutes(3)))
struct GettingStartedSnippets {
    /// The store "Describe the store" configures; the app delegate of "Create and launch the controller" uses it.
    static var store: StoreConfiguration!

    /// "Describe the store".
    static func describeTheStore(documents: String) -> StoreConfiguration {
        // snippet.show

        // `.keyValue` holds the key-value table of `put`/`value(forKey:)` and of the locked
        // inbox's default handlers (applied first anyway); the app's migrations come after it.
        var migrator = DatabaseMigrator.keyValue
        migrator.registerMigration("create notes") { db in
            try db.execute("CREATE TABLE notes(id TEXT PRIMARY KEY, body TEXT NOT NULL)")
        }
        let store = StoreConfiguration(
            path: documents + "/Notes.sqlite", protectionClass: .complete, migrator: migrator)
        // snippet.end
        return store
    }

    // snippet.getting-started-app-delegate
    @MainActor
    final class AppDelegate {
        let dataController: DataController

        init(keys: any DataController.KeySource) {
            dataController = DataController(configuration: .init(store: store), keys: keys)
        }

        func application(didFinishLaunchingWithOptions options: LaunchOptions) -> Bool {
            // returns at once; the store attaches in the background
            dataController.launch(options)
            return true
        }
    }
    // snippet.end

    @Test("getting-started-describe: the article's store takes key-value writes, locked-inbox records and notes")
    func describedStoreWorks() async throws {
        let device = try SnippetDevice()
        let controller = try await device.launchBeforeFirstUnlock(Self.describeTheStore(documents: device.documents))
        // The default inbox handlers write to the key-value table `.keyValue` creates: merged at the unlock, not
        // quarantined (`no such table: entries`, with a migrator that lacks it).
        try controller.appendToInbox(.put(key: "from-the-inbox", value: "merged"))
        try device.unlock()
        try await controller.perform("write") { coordinator in
            try await coordinator.put("k", "v")
            try await coordinator.write { db in try db.execute("INSERT INTO notes(id, body) VALUES ('1', 'first')") }
        }
        let (value, merged, quarantined) = try await controller.perform("read") { coordinator in
            (try await coordinator.value(forKey: "k"), try await coordinator.value(forKey: "from-the-inbox"),
             try await coordinator.quarantinedInboxRecords().map(\.reason))
        }
        #expect(value == "v")
        #expect(merged == "merged")
        #expect(quarantined.isEmpty)
        await controller.terminate()
    }

    @Test("getting-started-app-delegate: launch returns at once, and the queued work runs once the store is ready")
    func appDelegateLaunches() async throws {
        let device = try SnippetDevice()
        Self.store = Self.describeTheStore(documents: device.documents)
        try await device.reboot()  // before the first unlock: the launch waits for protected data
        let delegate = AppDelegate(keys: device.keys)
        #expect(delegate.application(didFinishLaunchingWithOptions: LaunchOptions(reason: .location, inBackground: true)))
        await waitForPhase(delegate.dataController) { $0 == .waitingForProtectedData }
        #expect(delegate.dataController.presentedError == nil)  // never presented for a locked device
        try device.unlock()
        await waitForPhase(delegate.dataController) { $0 == .ready }
        await delegate.dataController.terminate()
    }

    @Test("getting-started-perform: perform waits for the store, runs the closure and returns its result")
    func performReturnsTheResult() async throws {
        let device = try SnippetDevice()
        Self.store = Self.describeTheStore(documents: device.documents)
        let dataController = AppDelegate(keys: device.keys).dataController
        dataController.launch(LaunchOptions())
        try await dataController.perform("add") { coordinator in
            try await coordinator.write { db in try db.execute("INSERT INTO notes(id, body) VALUES ('1', 'first')") }
        }
        // snippet.getting-started-perform
        let notes = try await dataController.perform("load notes") { coordinator in
            try await coordinator.read { db in
                try db.fetchValues(String.self, "SELECT body FROM notes")
            }
        }
        // snippet.end
        #expect(notes == ["first"])
        await dataController.terminate()
    }
}
