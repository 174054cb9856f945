import ProtectedStore
import Testing

// The code of Sources/ProtectedStore/Documentation.docc/TheInbox.md (scripts/doc-snippets.py checks that each
// region below is, byte for byte, a block of the article).

/// TheInbox.md on a simulated device: written while locked, merged at the unlock.
@MainActor
@Suite("TheInbox.md", .timeLimit(.minutes(3)))
struct TheInboxSnippets {
    @Test("the-inbox-merging, the-inbox-writing: what the app and an extension append while locked merges at the unlock, nothing quarantined")
    func writtenWhileLockedMergesAtUnlock() async throws {
        let device = try SnippetDevice()
        let path = device.documents + "/app.sqlite"
        // The article shows the writing first; the store's configuration comes first here, since the controller
        // that writes is launched on it (a local type may be used before its declaration).
        // snippet.the-inbox-merging
        var migrator = DatabaseMigrator.keyValue
        migrator.registerMigration("create visits") { db in
            try db.execute("CREATE TABLE visits(place TEXT NOT NULL)")
        }
        let handlers = InboxHandlers.keyValue.handling(VisitLogged.self) { database, visit in
            try database.execute("INSERT INTO visits(place) VALUES (?)", [.text(visit.place)])
        }
        let store = StoreConfiguration(path: path, migrator: migrator, inboxHandlers: handlers)
        // snippet.end
        let dataController = try await device.launchBeforeFirstUnlock(store)

        // snippet.the-inbox-writing
        // A key-value write:
        try dataController.appendToInbox(.put(key: "last-location", value: "48.85,2.29"))

        // An app's own change, with a kind and a schema version:
        struct VisitLogged: InboxChange {
            static let kind = "visit-logged"
            static let schemaVersion = 1
            var place: String
        }
        try LockedInbox(files: store.files).append(VisitLogged(place: "café"))
        // snippet.end

        var merges: [InboxMergeReport] = []
        let observation = dataController.observe { event in
            if case .inboxMerged(let report) = event { merges.append(report) }
        }
        try device.unlock()
        await waitForPhase(dataController) { $0 == .ready }
        let (location, places, quarantined) = try await dataController.perform("check") { coordinator in
            let places = try await coordinator.read { db in try db.fetchValues(String.self, "SELECT place FROM visits") }
            return (try await coordinator.value(forKey: "last-location"), places,
                    try await coordinator.quarantinedInboxRecords().map(\.reason))
        }
        #expect(location == "48.85,2.29")
        #expect(places == ["café"])
        #expect(quarantined.isEmpty)
        #expect(!merges.isEmpty)
        _ = observation
        await dataController.terminate()
    }
}
