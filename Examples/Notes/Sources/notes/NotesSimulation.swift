import Foundation
import NotesModel
import ProtectedStoreTesting

/// `notes simulate`: the app on ProtectedStoreTesting's seeded simulation — locked background launches,
/// locks and unlocks, reboots, crashes (one inside the inbox merge) and the app's own actions, with the app's
/// invariant checked after every step.
///
/// Without a planted bug the app passes every seed. Each planted bug is found within the same seeds, and its
/// failure shrunk to a short story.
@MainActor
enum NotesSimulation {
    /// A bug planted in the app, to show what the simulation finds.
    enum PlantedBug: String, CaseIterable {
        /// The inbox handler counts the badge in a file outside the merge's transaction: not idempotent, it
        /// double-counts when a crash falls inside the merge.
        case badgeOutsideStore = "badge-outside-store"
        /// The list screen reads with `readNow` at launch, before the store is ready.
        case readBeforeReady = "read-before-ready"
    }

    /// The seeds a run tries by default (`--seeds`).
    static let seeds: Range<UInt64> = 0..<50
    /// How many steps each seed draws by default (`--steps`).
    static let steps = 100

    /// The app, with `planted` in it.
    ///
    /// - Parameters:
    ///   - planted: the bug to plant, or `nil` for the app as it ships.
    ///   - concurrentSeeds: how many seeds run at once.
    static func simulation(planting planted: PlantedBug?, concurrentSeeds: Int = 1) -> AppSimulation {
        var simulation = AppSimulation { app in
            var store = NotesStore.configuration(inContainer: app.environment.stateDirectory)
            if planted == .badgeOutsideStore {
                store.inboxHandlers = NotesStore.inboxHandlersCountingOutsideTheStore(badgeFile: badgeFile(app))
            }
            return store
        }
        // Each run keeps its state in its context and its app folder, so seeds may run side by side.
        simulation.concurrentSeeds = concurrentSeeds
        // The share extension, in the simulation's process: it seals a note into the locked inbox.
        simulation.action("share a note", weight: 4) { app in
            let shared = NoteShared(title: "Shared \(app.number)", body: "from the share sheet", sharedAt: Date(), tags: ["shared"])
            _ = try app.controller.appendToInbox(shared)
        }
        // The list screen: a quick read on the main actor when the store is ready, queued when it is not.
        simulation.action("open the list") { app in
            let query: @Sendable (Database) throws -> Int = { db in try db.fetchAll(Note.self, Note.listQuery).count }
            if planted == .readBeforeReady || app.controller.phase == .ready {
                _ = try app.controller.readNow(query)
            } else {
                try app.submit("load the list") { coordinator in _ = try await coordinator.read(query) }
            }
        }
        // A draft the user saves: the simulation checks it is never lost once saved.
        simulation.action("save a draft") { app in
            try app.put("draft.\(app.number)", "draft \(app.number)")
        }
        simulation.invariant("the badge counts shared notes") { app in
            let (shared, storedBadge) = try await app.coordinator.read { db in
                (
                    try db.fetchValue(Int.self, "SELECT count(*) FROM notes WHERE title LIKE 'Shared %'") ?? 0,
                    try db.fetchValue(String.self, "SELECT value FROM entries WHERE key = ?", [NotesStore.badgeKey])
                )
            }
            let badge =
                planted == .badgeOutsideStore
                ? (try? String(contentsOfFile: badgeFile(app), encoding: .utf8)).flatMap { Int($0) } ?? 0
                : storedBadge.flatMap { Int($0) } ?? 0
            return badge == shared ? nil : "badge \(badge), shared notes \(shared)"
        }
        return simulation
    }

    /// The planted badge's file, among the app's own files (which the simulated disk leaves as they are).
    private static func badgeFile(_ app: AppSimulationContext) -> String {
        app.appDirectory + "/badge"
    }

    /// Runs the app as it ships over every seed, then each planted bug, which must be found and shrunk to at
    /// most ten steps; `only` runs one planted bug and fails with its story.
    ///
    /// - Parameters:
    ///   - only: a planted bug to run alone.
    ///   - seeds: the seeds to run.
    ///   - steps: how many steps each seed draws.
    ///   - concurrentSeeds: how many seeds run at once (the failures are the same at any number).
    /// - Throws: a ``StoryFailure`` when the app fails, or a planted bug is not found or not shrunk.
    static func run(only: PlantedBug?, seeds: Range<UInt64>, steps: Int, concurrentSeeds: Int) async throws {
        if let only {
            try await simulation(planting: only, concurrentSeeds: concurrentSeeds).run(seeds: seeds, steps: steps)
            return
        }
        let started = ContinuousClock.now
        print("simulating the app: \(seeds.count) seeds × \(steps) steps")
        try await simulation(planting: nil, concurrentSeeds: concurrentSeeds).run(seeds: seeds, steps: steps)
        print("   every seed passed (\((ContinuousClock.now - started).milliseconds))")
        for bug in PlantedBug.allCases {
            print("\nplanted: \(bug.rawValue)")
            do {
                try await simulation(planting: bug, concurrentSeeds: concurrentSeeds).run(seeds: seeds, steps: steps)
                throw StoryFailure("the simulation did not find the planted bug \(bug.rawValue) in \(seeds.count) seeds")
            } catch let failure as AppSimulationFailure {
                for line in failure.description.split(separator: "\n") { print("   \(line)") }
                try check(failure.steps.count <= 10, "the failure shrinks to at most 10 steps; it has \(failure.steps.count)")
            }
        }
        print("\nBoth planted bugs were found and shrunk (\((ContinuousClock.now - started).milliseconds)).")
    }
}
