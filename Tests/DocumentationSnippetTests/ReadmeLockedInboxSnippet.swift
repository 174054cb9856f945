import ProtectedStore
import Testing

// The README's block in "The locked inbox: writing while locked" (scripts/doc-snippets.py checks that the region
// is, byte for byte, the README's block).

/// The README's locked inbox: an app's own change, sealed while locked, merged by its handler at the unlock.
@MainActor
@Suite("README.md: the locked inbox", .timeLimit(.minutes(3)))
struct ReadmeLockedInboxSnippet {
    @Test("readme-locked-inbox: a change appended while locked is applied by its handler at the unlock, nothing quarantined")
    func appendWhileLockedMergesAtUnlock() async throws {
        let device = try SnippetDevice()
        let path = device.documents + "/app.sqlite"
        // snippet.readme-locked-inbox
        struct VisitLogged: InboxChange {             // Codable & Sendable, with a kind and a schema version
            static let kind = "visit-logged"
            static let schemaVersion = 1
            var place: String
        }
        var migrator = DatabaseMigrator.keyValue      // and the table the handler writes to
        migrator.registerMigration("create visits") { db in
            try db.execute("CREATE TABLE visits(place TEXT NOT NULL)")
        }
        let handlers = InboxHandlers.keyValue.handling(VisitLogged.self) { database, visit in
            try database.execute("INSERT INTO visits(place) VALUES (?)", [.text(visit.place)])
        }
        let store = StoreConfiguration(path: path, migrator: migrator, inboxHandlers: handlers)
        // snippet.hide
        let dataController = try await device.launchBeforeFirstUnlock(store)  // the store exists; the device is locked
        // snippet.show
        // While locked, from the app or an extension:
        try LockedInbox(files: store.files).append(VisitLogged(place: "café"))
        // snippet.end

        try device.unlock()
        await waitForPhase(dataController) { $0 == .ready }
        let (places, quarantined) = try await dataController.perform("check") { coordinator in
            (try await coordinator.read { db in try db.fetchValues(String.self, "SELECT place FROM visits") },
             try await coordinator.quarantinedInboxRecords().map(\.reason))
        }
        #expect(places == ["café"])
        #expect(quarantined.isEmpty)
        await dataController.terminate()
    }
}
