import Foundation
import NotesModel
import ProtectedData
import ProtectedStore
import Synchronization

/// The story the example tells: a notes app on a simulated phone, from its first launch to the errors it
/// would show. Each step prints what happens and checks it; the first check that fails ends the story.
///
/// The device runs on a ``ManualClock``, so the ten-second grace period after a lock passes in an instant
/// and the story is deterministic; the controller shares that clock (its inbox poll would tick on it too,
/// but the story never needs it: the extension's record is merged at the attach that follows the unlock).
@MainActor
final class NotesStory {
    /// How many steps ``run()`` tells.
    static let stepCount = 6

    /// Everything the story writes: the device's state and the app's shared container.
    let root: String
    /// The folder the app and its share extension share (an app group's container on a phone).
    let container: String
    /// The virtual clock of the device and the controller.
    let clock = ManualClock()
    /// The phone's Data Protection, simulated: passcode, keybag, lock, grace period.
    let device: KeybagDevice
    /// The app's data controller: two-phase launch, the operation queue, the store's coordinator.
    let controller: DataController
    /// The list screen, following the store.
    let list = NoteList()

    /// The device's passcode (an example's passcode is no secret).
    private let passcode = "1234"
    /// What inbox merges the controller reported.
    private var merges: [InboxMergeReport] = []
    /// What errors the controller presented.
    private var presented: [StoreError] = []
    private var observation: DataController.Observation?

    /// Notes the app writes in step 3.
    private let shoppingList = Note(
        title: "Shopping list", body: "eggs, flour, milk", createdAt: utc(2025, 3, 1, 9, 15), tags: ["groceries", "home"])
    private let talkOutline = Note(
        title: "Talk outline", body: "1. the locked phone 2. the two-phase launch", createdAt: utc(2025, 3, 4, 18, 0),
        tags: ["work"])
    private let booksToRead = Note(
        title: "Books to read", body: "The Mythical Man-Month", createdAt: utc(2025, 3, 8, 21, 30), tags: ["home"])

    /// Sets up the device (unlocked, as after a phone's set-up) and creates the app's controller. Nothing is
    /// launched yet.
    ///
    /// - Parameter root: a folder that does not exist yet; it is created with mode 0700.
    /// - Throws: when the folders or the device cannot be written.
    init(root: String) throws {
        self.root = root
        container = root + "/AppGroup"
        // Owner-only, like the folders the library creates itself: the store, its key file and its inbox go
        // here (the library writes key files 0600 and refuses to read one that others can read).
        try FileManager.default.createDirectory(atPath: container, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: root)
        device = try KeybagDevice.setUp(
            in: root + "/device", passcode: SecureBytes(utf8: passcode),
            // Argon2id at its minimal cost keeps the example fast; a real passcode gets the default cost.
            configuration: .init(kdf: .minimal), clock: clock)
        controller = DataController(
            configuration: .init(store: NotesStore.configuration(inContainer: container)), keys: device, clock: clock)
    }

    /// Tells the story.
    ///
    /// - Throws: a ``StoryFailure`` naming the first step that did not behave as expected, or the library's
    ///   error where one was not expected.
    func run() async throws {
        print("state in \(root)")
        observation = controller.observe { [unowned self] event in
            switch event {
            case .inboxMerged(let report): merges.append(report)
            case .errorPresented(let error): presented.append(error)
            case .phaseChanged, .operationFinished: break
            }
        }
        try setUpDevice()
        try await launch()
        try await writeAndReadRecords()
        try await observeAnImport()
        try await shareWhileLocked()
        try await presentErrors()
    }

    // MARK: 1. The device

    private func setUpDevice() throws {
        step("1. A simulated device")
        print("   set up in device/, with a passcode (Argon2id at its minimal cost: for an example only)")
        print("   device \(device.lockState); class-A keys held; grace period after a lock: \(device.gracePeriod)")
        try check(
            device.lockState == .unlocked && device.isProtectedDataAvailable(for: .complete),
            "a device is unlocked after its set-up, with its class-A keys; it is \(device.lockState)")
    }

    // MARK: 2. Launch

    private func launch() async throws {
        step("2. Launch: the store attaches, migrations run, the list starts observing")
        list.start(following: controller)
        controller.launch()
        print("   launch() returned at once (phase \(controller.phase)); the store attaches in the background")
        let phase = try await follow(controller, until: { $0 != .launching })
        try check(phase == .ready, "the first launch on an unlocked device attaches the store; the phase is \(phase)")
        // The list's first value comes once the store is ready. (The story waits for each value it expects
        // before it prints more, so that its lines and the list's come in a fixed order.)
        _ = try await list.notes(where: { $0.isEmpty })
        let applied = try await coordinator().read { db in try NotesStore.migrator().appliedMigrations(in: db) }
        print("   migrations applied, in order: \(applied.map { "\"\($0)\"" }.joined(separator: ", "))")
        try check(
            applied == NotesStore.migrator().migrationIdentifiers,
            "every registered migration is applied at the first attach; applied: \(applied)")
    }

    // MARK: 3. Records

    private func writeAndReadRecords() async throws {
        step("3. Records: Codable notes in, Codable notes out")
        let notes = [shoppingList, talkOutline, booksToRead]
        print("   saving 3 notes in one transaction: perform → coordinator.write → db.insert(note, into: \"notes\")")
        // A UI-facing write goes through `perform`: it runs now when the store is ready, and waits for the
        // unlock (silently, in order) when it is not.
        try await controller.perform("save 3 notes") { coordinator in
            try await coordinator.write { db in
                for note in notes { try db.insert(note, into: Note.table) }
            }
        }
        _ = try await list.notes(where: { $0.count == 3 })

        let since = utc(2025, 3, 3)
        let id = shoppingList.id
        let (found, recent, titles, count) = try await coordinator().read { db in
            (
                // Named arguments.
                try db.fetchOne(Note.self, "SELECT * FROM notes WHERE id = :id", ["id": id]),
                // Positional arguments: a Date binds as SQLite's date text, which sorts as time does.
                try db.fetchAll(Note.self, "SELECT * FROM notes WHERE createdAt >= ? ORDER BY createdAt", [since]),
                try db.fetchValues(String.self, "SELECT title FROM notes ORDER BY title"),
                try db.fetchValue(Int.self, "SELECT count(*) FROM notes")
            )
        }
        print("   fetchOne by id (named argument :id): \(found.map(describe) ?? "nothing")")
        try check(found == shoppingList, "a note reads back equal to what was written; read \(String(describing: found))")
        print("   fetchAll created since \(format(since)) (positional argument): \(recent.map { "\"\($0.title)\"" }.joined(separator: ", "))")
        try check(recent == [talkOutline, booksToRead], "two notes were written after \(format(since)); read \(recent.map(\.title))")
        print("   fetchValues titles: \(titles.joined(separator: ", ")); fetchValue count(*): \(count ?? 0)")
        try check(count == 3 && titles == ["Books to read", "Shopping list", "Talk outline"], "three notes; read \(titles)")
    }

    // MARK: 4. Observation and a long import

    /// How far the import is, for the story to look at while it runs.
    private final class ImportProgress: Sendable {
        let inserted = Atomic<Int>(0)
    }

    private func observeAnImport() async throws {
        step("4. Observation, and a read while a 5,000-note import is open")
        let importCount = 5_000
        let imported = (0..<importCount).map { index in
            Note(
                title: "Imported note \(index + 1)", body: "from the old app's export, line \(index + 1)",
                createdAt: utc(2024, 1, 1).addingTimeInterval(Double(index) * 60),
                tags: index % 2 == 0 ? ["imported"] : ["imported", "archive"])
        }
        let coordinator = try coordinator()
        let progress = ImportProgress()
        let importStarted = ContinuousClock.now
        // The import is one transaction on the writer. It goes to the coordinator directly, not through
        // `perform`: `perform` runs operations one after another, so a read queued behind it would wait.
        let importing = Task.detached { () throws -> Duration in
            try await coordinator.write { db in
                for note in imported {
                    try db.insert(note, into: Note.table)
                    progress.inserted.add(1, ordering: .relaxed)
                }
            }
            return ContinuousClock.now - importStarted
        }
        while progress.inserted.load(ordering: .relaxed) == 0 { try await Task.sleep(for: .milliseconds(1)) }
        print("   coordinator.write inserting \(importCount.spelled) notes in one transaction: started")

        // Reads run on a reader connection, beside the writer (WAL): they never wait for a write, and see the
        // store as of their start.
        let readStarted = ContinuousClock.now
        let seen = try await coordinator.read { db in try db.fetchValue(Int.self, "SELECT count(*) FROM notes") ?? -1 }
        let readTime = ContinuousClock.now - readStarted
        let insertedWhenReadReturned = progress.inserted.load(ordering: .relaxed)
        if insertedWhenReadReturned < importCount {
            print(
                "   coordinator.read returned in \(readTime.milliseconds), while the import was open "
                    + "(\(insertedWhenReadReturned.spelled) of \(importCount.spelled) inserted, uncommitted): it saw \(seen) notes")
            // The import's transaction had not even finished inserting, so it cannot have committed.
            try check(seen == 3, "a read during an open import sees the store as of before it (3 notes); it saw \(seen)")
        } else {
            print(
                "   coordinator.read returned in \(readTime.milliseconds); the import had inserted all its notes "
                    + "by then (this machine was quick): it saw \(seen.spelled) notes")
        }
        try check(
            seen == 3 || seen == 3 + importCount,
            "a read sees all of a transaction or none of it: 3 or \((3 + importCount).spelled) notes, never \(seen.spelled)")
        let importTime = try await importing.value
        _ = try await list.notes(where: { $0.count == 3 + importCount })
        print("   the import committed after \(importTime.milliseconds); the list's query ran again on the commit")
    }

    // MARK: 5. The share extension while locked

    private func shareWhileLocked() async throws {
        step("5. The share extension adds a note while the device is locked")
        print("   the user locks the phone")
        device.lock()
        var phase = try await follow(controller, until: { $0 == .waitingForProtectedData })
        print("   the class-A store closed at the lock; coordinator \(controller.coordinator == nil ? "nil" : "still set")")
        try check(controller.coordinator == nil, "no coordinator while the store is closed")
        clock.advance(by: device.gracePeriod)
        print("   the clock passes the \(device.gracePeriod) grace period: class-A keys wiped, device \(device.lockState)")
        try check(
            !device.isProtectedDataAvailable(for: .complete), "class-A keys are gone after the grace period")

        // The user, in a UI the system launched while locked, pins a note: the operation waits for the store.
        let id = shoppingList.id
        let pinning = Task { [controller] in
            try await controller.perform("pin \"Shopping list\"") { coordinator in
                try await coordinator.write { db in try db.execute("UPDATE notes SET pinned = 1 WHERE id = :id", ["id": id]) }
            }
        }
        while controller.queuedOperationCount == 0 { await Task.yield() }
        print("   the user pins \"Shopping list\": queued until the store is back, \(controller.queuedOperationNames)")

        // The extension: a second process with the store's files and no key.
        let shareExtension = try ShareExtensionProcess()
        print("   running \(ShareExtensionProcess.executableName) (a second process, given only the app group's folder)")
        let title = "Pancakes"
        let run = try await shareExtension.run([container, title, "2 eggs, 250 g flour, 500 ml milk", "recipes", "shared"])
        for line in run.output.split(separator: "\n") { print("   | \(line)") }
        try check(run.status == 0, "the extension exits 0 once its record is durable; it exited \(run.status): \(run.error)")
        let sharedID = run.output.split(separator: "\n").first { $0.hasPrefix("note id ") }.flatMap { UUID(uuidString: String($0.dropFirst(8))) }
        let waiting = try controller.inbox.pendingCount()
        print("   \(waiting) sealed record waits in the inbox; the store is still closed (phase \(controller.phase))")
        try check(waiting == 1 && controller.phase == .waitingForProtectedData, "one record waits, the store closed")

        let mergesBefore = merges.count
        try device.unlock(passcode: SecureBytes(utf8: passcode))
        print("   the user unlocks the phone")
        phase = try await follow(controller, until: { $0 != .waitingForProtectedData && $0 != .launching })
        try check(phase == .ready, "the store attaches again after the unlock; the phase is \(phase)")
        let notes = try await list.notes(where: { $0.contains { $0.title == title } })
        let merged = merges.dropFirst(mergesBefore).reduce(0) { $0 + $1.merged.count }
        print("   the attach merged \(merged) inbox record before anything else saw the store")
        try check(merged == 1, "the attach merges the one record the extension sealed; it merged \(merged)")
        guard let note = notes.first(where: { $0.title == title }) else { throw StoryFailure("the merged note is gone") }
        print("   the list sees the merged note: \(describe(note))")
        try check(note.id == sharedID, "the merged note has the id the extension gave it (\(String(describing: sharedID)))")
        try check(try controller.inbox.pendingCount() == 0, "the merge empties the inbox")

        try await pinning.value
        let pinned = try await list.notes(where: { $0.first?.id == id })
        print("   the queued pin ran after the attach: the list now starts with \(describe(pinned[0]))")
        try check(pinned[0].pinned, "the pinned note is pinned")
        // The locked-device case is not an error: nothing was shown to a user who may not even be looking.
        try check(presented.isEmpty, "a lock and an unlock present no error; presented \(presented)")
        print("   no error was presented through the lock, the wait and the unlock")
    }

    // MARK: 6. Errors

    private func presentErrors() async throws {
        step("6. Errors the app would present")
        // Inside a closure and outside it, one error type: the SQL layer throws `StoreError`, with SQLite's
        // extended result code on it, and `perform` rethrows it unchanged.
        do {
            let copy = shoppingList
            // `insert` returns the new row's id, so the closure (and `perform`) return it: discarded here.
            _ = try await controller.perform("save a copy") { coordinator in
                try await coordinator.write { db in try db.insert(copy, into: Note.table) }
            }
            throw StoryFailure("saving a second note with an existing id succeeded")
        } catch let error as StoreError {
            // `error.detail` names the file and the statement: for a bug report, not for the user.
            print("   a note whose id exists: \(error.code) — \(error.message) (SQLite's extended code \(error.extendedResultCode ?? 0))")
            try check(error.code == .constraint, "a duplicate primary key is a constraint error; got \(error.code)")
            try check(error.extendedResultCode == 1555, "SQLITE_CONSTRAINT_PRIMARYKEY; got \(String(describing: error.extendedResultCode))")
        }

        let before = try await fingerprint(of: coordinator())
        await controller.terminate()
        list.stop()
        print("   the app terminates; an older build (migrations up to \"\(NotesStore.createNotes)\") launches on the same store")
        let older = DataController(
            configuration: .init(store: NotesStore.configuration(inContainer: container, version: 1)), keys: device, clock: clock)
        var shownByOlder: [StoreError] = []
        let olderObservation = older.observe { event in
            if case .errorPresented(let error) = event { shownByOlder.append(error) }
        }
        older.launch()
        let phase = try await follow(older, until: { $0 != .launching })
        olderObservation.cancel()
        await older.terminate()
        guard case .failed(let error) = phase else {
            throw StoryFailure("a store from a newer app must fail to attach; the phase is \(phase)")
        }
        print("   presented: \"There was an error opening the database.\" — \(error)")
        try check(error.code == .storeFromNewerApp, "the older app's attach fails with store-from-newer-app; got \(error.code)")
        try check(shownByOlder.count == 1, "the error is presented once; it was presented \(shownByOlder.count) times")

        let current = DataController(
            configuration: .init(store: NotesStore.configuration(inContainer: container)), keys: device, clock: clock)
        current.launch()
        let again = try await follow(current, until: { $0 != .launching })
        try check(again == .ready, "the current app attaches the store again; the phase is \(again)")
        guard let coordinator = current.coordinator else { throw StoryFailure("no coordinator in the ready phase") }
        let after = try await fingerprint(of: coordinator)
        await current.terminate()
        // `terminate()` returns once the store is closed: the folder can be removed now.
        let stillOpen = await coordinator.isOpen
        try check(!stillOpen, "the store is closed when terminate() returns")
        print("   the current build attaches it again: unchanged — \(after.count.spelled) notes, migrations \(after.migrations), same schema")
        try check(after == before, "the refused attach changed nothing; before \(before), after \(after)")
    }

    /// What "the store is unchanged" compares: the notes, the applied migrations, the schema.
    private struct Fingerprint: Sendable, Equatable {
        var count: Int
        var newest: [String]
        var migrations: [String]
        var schema: [String]
    }

    private func fingerprint(of coordinator: StoreCoordinator) async throws -> Fingerprint {
        try await coordinator.read { db in
            Fingerprint(
                count: try db.fetchValue(Int.self, "SELECT count(*) FROM notes") ?? 0,
                newest: try db.fetchValues(String.self, "SELECT title FROM notes ORDER BY createdAt DESC LIMIT 5"),
                migrations: try DatabaseMigrator().appliedMigrations(in: db),
                schema: try db.fetchValues(String.self, "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY name"))
        }
    }

    // MARK: Helpers

    /// Starts a step: prints its title and gives it to the watchdog.
    private func step(_ title: String) {
        print("\n\(title)")
        Watchdog.begin(title)
    }

    /// The attached store's coordinator.
    private func coordinator() throws -> StoreCoordinator {
        guard let coordinator = controller.coordinator else {
            throw StoryFailure("no coordinator: the store is \(controller.phase)")
        }
        return coordinator
    }

    /// Follows `controller`'s phases — the current one first — until `done` holds, and prints them.
    private func follow(
        _ controller: DataController, until done: (DataController.Phase) -> Bool
    ) async throws -> DataController.Phase {
        var seen: [DataController.Phase] = []
        for await phase in controller.phases() {
            seen.append(phase)
            if done(phase) {
                print("   phases: \(seen.map(\.description).joined(separator: " → "))")
                return phase
            }
        }
        throw StoryFailure("the controller's phases ended at \(seen.last.map(\.description) ?? "nothing")")
    }

    private func describe(_ note: Note) -> String {
        "\"\(note.title)\" — \"\(note.body)\", tags \(note.tags), \(format(note.createdAt))\(note.pinned ? ", pinned" : "")"
    }
}

/// A date in UTC.
private func utc(_ year: Int, _ month: Int, _ day: Int, _ hour: Int = 0, _ minute: Int = 0) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: "UTC")!
    return calendar.date(from: DateComponents(year: year, month: month, day: day, hour: hour, minute: minute))!
}

/// `2025-03-01T09:15:00Z`.
private func format(_ date: Date) -> String { ISO8601DateFormatter().string(from: date) }
