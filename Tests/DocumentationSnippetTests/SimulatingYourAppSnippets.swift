// The code of Sources/ProtectedStoreTesting/Documentation.docc/SimulatingYourApp.md (scripts/doc-snippets.py
// checks that each region is, byte for byte, one of the article's blocks). The regions are themselves tests.

// snippet.simulating-your-app
import ProtectedStoreTesting
import Testing

/// A visit the app's location extension logs, maybe while the device is locked.
struct PlaceVisited: InboxChange {
    static let kind = "place-visited"
    static let schemaVersion = 1
    var place: String
}

/// The app as the simulation runs it: its store, its actions, its invariants.
@MainActor func visitsApp() -> AppSimulation {
    var simulation = AppSimulation { app in
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create visits") { db in
            try db.execute("CREATE TABLE visits(place TEXT NOT NULL)")
        }
        let handlers = InboxHandlers.keyValue
            .handling(PlaceVisited.self) { db, visit in
                try db.execute(
                    "INSERT INTO visits(place) VALUES (?)", [.text(visit.place)])
            }
        return StoreConfiguration(
            path: app.environment.storePath("visits.sqlite"),
            migrator: migrator, inboxHandlers: handlers)
    }
    // The extension seals a visit into the locked inbox: it needs no key.
    simulation.action("log a visit", weight: 4) { app in
        let visit = PlaceVisited(place: "place \(app.number)")
        _ = try app.controller.appendToInbox(visit)
    }
    // A UI write: queued while the store is locked, checked present once it ran.
    simulation.action("save a note") { app in
        try app.put("note \(app.number)", "text")
    }
    // A screen's read: at once when the store is ready, queued when it is not.
    simulation.action("show the visits") { app in
        if app.controller.phase == .ready {
            _ = try app.controller.readNow { db in
                try db.fetchValue(Int.self, "SELECT count(*) FROM visits")
            }
        } else {
            try app.submit("count visits") { _ in }
        }
    }
    simulation.invariant("every visit has a place") { app in
        let empty = try await app.coordinator.read { db in
            try db.fetchValue(
                Int.self, "SELECT count(*) FROM visits WHERE place = ''") ?? 0
        }
        return empty == 0 ? nil : "\(empty) visits without a place"
    }
    return simulation
}

@Test @MainActor func visitsSurviveLockedLaunches() async throws {
    try await visitsApp().run(seeds: 0..<20, steps: 100)
}
// snippet.end

// snippet.simulating-your-app-replay
@Test @MainActor func aVisitMergedAfterACrashInsideTheMerge() async throws {
    try await visitsApp().replay([
        .action("log a visit"), .lock, .action("log a visit"), .crash, .unlock,
        .crashInsideMerge, .launch,
    ])
}
// snippet.end
