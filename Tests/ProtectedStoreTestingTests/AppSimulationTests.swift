import Foundation
import ProtectedStoreTesting
import Testing

/// A visit an app's location extension logs while the device may be locked.
private struct VisitLogged: InboxChange {
    static let kind = "visit-logged"
    static let schemaVersion = 1
    var place: String
}

/// An app written against the public API alone: visits arrive through the locked inbox, the user reads the
/// visit count on a screen and saves notes, and a tally counts the visits. `tallyOutsideStore` plants the
/// bug: the inbox handler keeps the tally in a file of its own, outside the merge's transaction, so a crash
/// inside the merge counts the same visits again.
@MainActor
private func visitsApp(tallyOutsideStore: Bool) -> AppSimulation {
    var simulation = AppSimulation { app in
        let tallyFile = app.appDirectory + "/tally"
        var migrator = DatabaseMigrator()
        migrator.registerMigration("create visits") { db in
            try db.execute("CREATE TABLE visits(place TEXT NOT NULL)")
            try db.execute("CREATE TABLE tally(id INTEGER PRIMARY KEY CHECK (id = 0), visits INTEGER NOT NULL)")
            try db.execute("INSERT INTO tally(id, visits) VALUES (0, 0)")
        }
        let handlers = InboxHandlers.keyValue.handling(VisitLogged.self) { db, visit in
            try db.execute("INSERT INTO visits(place) VALUES (?)", [.text(visit.place)])
            if tallyOutsideStore {
                let tally = (try? String(contentsOfFile: tallyFile, encoding: .utf8)).flatMap { Int($0) } ?? 0
                try String(tally + 1).write(toFile: tallyFile, atomically: true, encoding: .utf8)
            } else {
                try db.execute("UPDATE tally SET visits = visits + 1")
            }
        }
        return StoreConfiguration(path: app.environment.storePath("visits.sqlite"), migrator: migrator, inboxHandlers: handlers)
    }
    simulation.action("log a visit", weight: 4) { app in
        _ = try app.controller.appendToInbox(VisitLogged(place: "place \(app.number)"))
    }
    simulation.action("save a note") { app in
        try app.put("note \(app.number)", "text \(app.number)")
    }
    simulation.action("show the visit count") { app in
        try app.submit("count visits") { coordinator in
            _ = try await coordinator.read { db in try db.scalar("SELECT count(*) FROM visits") }
        }
    }
    simulation.invariant("the tally counts the visits") { app in
        let (visits, storedTally) = try await app.coordinator.read { db in
            (try db.scalar("SELECT count(*) FROM visits")?.int64 ?? -1, try db.scalar("SELECT visits FROM tally")?.int64 ?? -1)
        }
        let tally = tallyOutsideStore
            ? (try? String(contentsOfFile: app.appDirectory + "/tally", encoding: .utf8)).flatMap { Int64($0) } ?? 0
            : storedTally
        return tally == visits ? nil : "the tally says \(tally) visits, the store holds \(visits)"
    }
    return simulation
}

/// The visits app with one more action, which saves a note and lists it as saved in a file of the app's own, and an
/// invariant that every listed note is stored. `swallowingFailedWrites` plants the bug: the action ignores a failed
/// write and lists the note anyway, so it claims a write it never made.
@MainActor
private func listingApp(swallowingFailedWrites: Bool) -> AppSimulation {
    var simulation = visitsApp(tallyOutsideStore: false)
    simulation.action("save a listed note", weight: 4) { app in
        let key = "listed \(app.number)"
        let listFile = app.appDirectory + "/saved"
        try app.submit("save \(key)") { coordinator in
            if swallowingFailedWrites {
                try? await coordinator.put(key, "text")
            } else {
                try await coordinator.put(key, "text")
            }
            let listed = (try? String(contentsOfFile: listFile, encoding: .utf8)) ?? ""
            try (listed + key + "\n").write(toFile: listFile, atomically: true, encoding: .utf8)
        }
    }
    simulation.invariant("every note listed as saved is stored") { app in
        let listed = ((try? String(contentsOfFile: app.appDirectory + "/saved", encoding: .utf8)) ?? "").split(separator: "\n")
        for key in listed where try await app.coordinator.value(forKey: String(key)) == nil {
            return "\"\(key)\" is listed as saved but not stored"
        }
        return nil
    }
    return simulation
}

/// The listing app with an extension, a second process that appends notes and visits to the store's inbox through
/// the store's files while the app may run, and an invariant that no visit is applied twice (each visit's place is
/// unique).
@MainActor
private func appWithExtension() -> AppSimulation {
    var simulation = listingApp(swallowingFailedWrites: false)
    simulation.action("an extension saves a note") { app in
        try app.appendToInboxFromAnotherProcess(.put(key: "extension note \(app.number)", value: "text \(app.number)"))
    }
    simulation.action("an extension logs a visit", weight: 3) { app in
        try app.appendToInboxFromAnotherProcess(VisitLogged(place: "place \(app.number)"))
    }
    simulation.invariant("each visit is applied once") { app in
        let twice = try await app.coordinator.read { db in
            try db.scalar("SELECT count(*) - count(DISTINCT place) FROM visits")?.int64 ?? -1
        }
        return twice == 0 ? nil : "\(twice) visits applied more than once"
    }
    return simulation
}

/// What an app's own simulation test looks like, and that a failure comes back as a short story.
@MainActor
@Suite("AppSimulation", .timeLimit(.minutes(5)))
struct AppSimulationTests {
    @Test("a correct app passes 10 seeds of 60 steps")
    func correctAppPasses() async throws {
        try await visitsApp(tallyOutsideStore: false).run(seeds: 0..<10, steps: 60)
    }

    @Test("a tally kept outside the merge's transaction is found, shrunk to at most ten steps, and replays by seed")
    func plantedBugIsFoundShrunkAndReplayed() async throws {
        let simulation = visitsApp(tallyOutsideStore: true)
        var found: AppSimulationFailure?
        for seed: UInt64 in 0..<10 {
            do { try await simulation.run(seed: seed, steps: 60) } catch let failure as AppSimulationFailure {
                found = failure
                break
            }
        }
        let failure = try #require(found, "no seed found the planted bug")
        #expect(failure.check == "the tally counts the visits")
        #expect(failure.steps.count <= 10)
        // A merge stopped after the handlers ran: by a crash inside it, or by an I/O error that fails its commit.
        let stopsAMerge = failure.steps.contains { step in
            switch step {
            case .crashInsideMerge, .ioError: true
            default: false
            }
        }
        #expect(stopsAMerge, "\(failure.steps)")
        #expect(failure.description.contains("simulation.run(seed: \(try #require(failure.seed)), steps: 60)"))

        // The printed seed replays the same failure, shrunk to the same steps.
        let again = await #expect(throws: AppSimulationFailure.self) {
            try await simulation.run(seed: try #require(failure.seed), steps: 60)
        }
        #expect(again?.steps == failure.steps)
        #expect(again?.message == failure.message)
        #expect(again?.failedStep == failure.failedStep)

        // The shrunk steps, pinned, fail the same check; the correct app passes them.
        let pinned = await #expect(throws: AppSimulationFailure.self) { try await simulation.replay(failure.steps) }
        #expect(pinned?.check == failure.check)
        try await visitsApp(tallyOutsideStore: false).replay(failure.steps)
    }

    @Test("a pinned regression: a visit logged while locked, a crash inside its merge, a launch")
    func pinnedRegression() async throws {
        let steps: [AppSimulationStep] = [
            .action("log a visit"), .lock, .action("log a visit"), .crash, .unlock, .crashInsideMerge, .launch,
        ]
        try await visitsApp(tallyOutsideStore: false).replay(steps)
        let failure = await #expect(throws: AppSimulationFailure.self) { try await visitsApp(tallyOutsideStore: true).replay(steps) }
        #expect(failure?.check == "the tally counts the visits")
    }

    @Test("power cuts of each mode are drawn, and a correct app keeps its acknowledged visits through one")
    func powerCuts() async throws {
        let drawn = visitsApp(tallyOutsideStore: false).steps(seed: 0, count: 600)
        for mode in AppSimulationStep.PowerCut.allCases {
            #expect(drawn.contains { if case .powerCut(mode, _) = $0 { true } else { false } }, "no \(mode) power cut drawn")
        }
        try await visitsApp(tallyOutsideStore: false).replay([
            .action("save a note"), .lock, .action("log a visit"), .powerCut(.tornOp, seed: 3), .unlock, .launch,
        ])
    }

    @Test("an action that reads before the store is ready fails the step, named")
    func readBeforeReady() async throws {
        var simulation = visitsApp(tallyOutsideStore: false)
        simulation.action("read now") { app in
            _ = try app.controller.readNow { db in try db.scalar("SELECT count(*) FROM visits") }
        }
        let failure = await #expect(throws: AppSimulationFailure.self) {
            try await simulation.replay([.action("log a visit"), .reboot, .action("read now")])
        }
        #expect(failure?.check == "step completes")
        #expect(failure?.message.contains(#".action("read now") threw"#) == true)
    }

    @Test("a write acknowledged through put and then lost behind the simulation's back fails its check")
    func lostAcknowledgedWrite() async throws {
        var simulation = visitsApp(tallyOutsideStore: false)
        simulation.action("clear the notes") { app in
            try app.submit("clear") { coordinator in try await coordinator.write { db in try db.execute("DELETE FROM entries") } }
        }
        try await simulation.replay([.action("save a note"), .lock, .unlock])
        let failure = await #expect(throws: AppSimulationFailure.self) {
            try await simulation.replay([.action("save a note"), .lock, .action("clear the notes"), .unlock])
        }
        #expect(failure?.check == "acknowledged writes present")
        #expect(failure?.failedStep == 3)
        #expect(failure?.message.contains("missing") == true)
    }

    @Test("I/O errors of each kind are drawn, and a correct app passes 10 seeds of 60 steps with them")
    func ioErrorsPass() async throws {
        let simulation = listingApp(swallowingFailedWrites: false)
        let drawn = simulation.steps(seed: 0, count: 600)
        for kind in AppSimulationStep.IOError.allCases {
            #expect(drawn.contains { if case .ioError(kind, _) = $0 { true } else { false } }, "no \(kind) I/O error drawn")
        }
        try await simulation.run(seeds: 0..<10, steps: 60)
    }

    @Test("a disk that fills up or fails for the rest of a launch or a write, from each of its calls in turn, loses no acknowledged note, and the app attaches at its next launch")
    func persistentIOErrorSweep() async throws {
        let simulation = listingApp(swallowingFailedWrites: false)
        for kind in [AppSimulationStep.IOError.diskFull, .diskFailed] {
            for after in stride(from: 0, to: 40, by: 3) {
                try await simulation.replay([
                    .action("save a listed note"), .crash, .ioError(kind, after: after), .launch,
                    .ioError(kind, after: after), .action("save a listed note"), .crash, .launch, .action("save a listed note"),
                ])
            }
        }
    }

    @Test("an I/O error that keeps the store from attaching is presented, and the next launch attaches with every note")
    func ioErrorAtAttach() async throws {
        try await listingApp(swallowingFailedWrites: false).replay([
            .action("save a note"), .crash, .ioError(.diskError, after: 0), .launch, .action("save a listed note"), .crash,
            .launch, .action("save a note"),
        ])
    }

    @Test("an inbox put acknowledged before an I/O error stops its merge waits for the next poll, at most one interval")
    func inboxPutMergedAfterAFailedMerge() async throws {
        var simulation = listingApp(swallowingFailedWrites: false)
        simulation.action("save a note through the inbox") { app in
            try app.appendToInbox(.put(key: "inbox note \(app.number)", value: "text \(app.number)"))
        }
        // Every call of the append and its merge fails once, in turn: the append fails (not acknowledged) or the
        // merge does (the note waits for the poll, which the wait lets run).
        for after in 0..<30 {
            try await simulation.replay([
                .ioError(.diskError, after: after), .action("save a note through the inbox"), .wait(seconds: 1),
            ])
        }
    }

    @Test("an action that swallows a failed write and lists the note as saved is found under an I/O error, and shrunk")
    func swallowedWriteIsFound() async throws {
        let simulation = listingApp(swallowingFailedWrites: true)
        var found: AppSimulationFailure?
        for seed: UInt64 in 0..<20 {
            do { try await simulation.run(seed: seed, steps: 60) } catch let failure as AppSimulationFailure {
                found = failure
                break
            }
        }
        let failure = try #require(found, "no seed found the swallowed write")
        #expect(failure.check == "every note listed as saved is stored")
        #expect(failure.steps.count <= 4)
        #expect(failure.steps.contains { if case .ioError = $0 { true } else { false } })
        #expect(failure.steps.contains(.action("save a listed note")))
        #expect(failure.description.contains(".ioError(."))
        // The shrunk steps fail the same check again, and the correct app passes them.
        let pinned = await #expect(throws: AppSimulationFailure.self) { try await simulation.replay(failure.steps) }
        #expect(pinned?.check == failure.check)
        try await listingApp(swallowingFailedWrites: false).replay(failure.steps)
    }

    @Test("a store file cut short is presented as store-damaged until restored, then attaches with every write")
    func damagedStoreFile() async throws {
        try await listingApp(swallowingFailedWrites: false).replay([
            .action("save a note"), .action("log a visit"), .action("save a listed note"),
            .damage(.truncateStore(length: 100)), .launch, .action("log a visit"), .action("save a note"), .lock, .unlock,
            .restoreDamage, .launch, .action("save a note"),
        ])
    }

    @Test("a flipped byte in the store's key file is presented as key-file-damaged until restored, then the store attaches")
    func damagedKeyFile() async throws {
        try await listingApp(swallowingFailedWrites: false).replay([
            .action("save a note"), .action("log a visit"), .damage(.flipKeyFileByte(offset: 20)), .action("log a visit"),
            .reboot, .unlock, .restoreDamage, .launch, .action("save a note"),
        ])
    }

    @Test("a symbolic link or a FIFO in place of each of SQLite's files is presented as io-error until restored, through a power cut, then the store attaches with every write")
    func linkOrFIFOInPlaceOfAStoreFile() async throws {
        let simulation = listingApp(swallowingFailedWrites: false)
        for file in AppSimulationStep.Damage.SQLiteFile.allCases {
            for damage: AppSimulationStep.Damage in [.linkInPlaceOf(file), .fifoInPlaceOf(file)] {
                try await simulation.replay([
                    .action("save a note"), .action("log a visit"), .action("save a listed note"),
                    .damage(damage), .launch, .action("log a visit"), .action("save a note"), .lock, .unlock,
                    .powerCut(.drop, seed: 7), .unlock, .launch, .action("save a note"),
                    .restoreDamage, .launch, .action("save a note"),
                ])
            }
        }
    }

    @Test("a symbolic link or a FIFO put where the shared-memory index is not (a power cut removed it) is presented as io-error, and its restore removes it")
    func linkOrFIFOWhereNoFileWas() async throws {
        let simulation = listingApp(swallowingFailedWrites: false)
        for damage: AppSimulationStep.Damage in [.linkInPlaceOf(.sharedMemory), .fifoInPlaceOf(.sharedMemory)] {
            try await simulation.replay([
                .action("save a note"), .action("log a visit"), .powerCut(.drop, seed: 3), .damage(damage), .unlock,
                .launch, .action("save a note"), .restoreDamage, .launch, .action("save a note"),
            ])
        }
        // The damage was there: an app that removes what is in the place of its `-shm` is found.
        var removing = simulation
        removing.action("remove what is in the way") { app in
            try FileManager.default.removeItem(atPath: app.environment.storePath("visits.sqlite") + "-shm")
        }
        let failure = await #expect(throws: AppSimulationFailure.self) {
            try await removing.replay([
                .action("save a note"), .powerCut(.drop, seed: 3), .damage(.linkInPlaceOf(.sharedMemory)), .unlock,
                .launch, .action("remove what is in the way"),
            ])
        }
        #expect(failure?.check == "damage reported, never repaired by replacement")
    }

    @Test("an app that removes a symbolic link in place of its write-ahead log is found: damage is never repaired by replacement")
    func linkRemovedIsFound() async throws {
        var simulation = listingApp(swallowingFailedWrites: false)
        simulation.action("remove what is in the way") { app in
            if case .failed(let error) = app.controller.phase, error.code == .ioError {
                try FileManager.default.removeItem(atPath: app.environment.storePath("visits.sqlite") + "-wal")
            }
        }
        let failure = await #expect(throws: AppSimulationFailure.self) {
            try await simulation.replay([
                .action("save a note"), .damage(.linkInPlaceOf(.writeAheadLog)), .launch, .action("remove what is in the way"),
            ])
        }
        #expect(failure?.check == "damage reported, never repaired by replacement")
        #expect(failure?.failedStep == 3)
        #expect(failure?.message.contains("write-ahead log (a symbolic link in its place)") == true)
    }

    @Test("an app that deletes its damaged store to start over is found: damage is never repaired by replacement")
    func damagedStoreDeletedIsFound() async throws {
        var simulation = listingApp(swallowingFailedWrites: false)
        simulation.action("start over when damaged") { app in
            if case .failed(let error) = app.controller.phase, error.code == .storeDamaged {
                try FileManager.default.removeItem(atPath: app.environment.storePath("visits.sqlite"))
            }
        }
        let failure = await #expect(throws: AppSimulationFailure.self) {
            try await simulation.replay([
                .action("save a note"), .damage(.truncateStore(length: 0)), .launch, .action("start over when damaged"),
            ])
        }
        #expect(failure?.check == "damage reported, never repaired by replacement")
        #expect(failure?.failedStep == 3)
        #expect(failure?.message.contains("removed") == true)
    }

    @Test("damage of each kind and its restore are drawn, and a correct app passes 10 seeds of 60 steps with them")
    func damageIsDrawnAndPasses() async throws {
        let simulation = listingApp(swallowingFailedWrites: false)
        let drawn = simulation.steps(seed: 0, count: 600)
        #expect(drawn.contains { if case .damage(.truncateStore) = $0 { true } else { false } })
        #expect(drawn.contains { if case .damage(.flipKeyFileByte) = $0 { true } else { false } })
        #expect(drawn.contains { if case .damage(.linkInPlaceOf) = $0 { true } else { false } })
        #expect(drawn.contains { if case .damage(.fifoInPlaceOf) = $0 { true } else { false } })
        #expect(drawn.contains(.restoreDamage))
        try await simulation.run(seeds: 10..<20, steps: 60)
    }

    @Test("appends from another process and the app's own are all merged, none applied twice, over 10 seeds of 60 steps")
    func secondProcessPasses() async throws {
        try await appWithExtension().run(seeds: 0..<10, steps: 60)
    }

    @Test("an append from another process may wait one poll interval, and is found missing after it")
    func secondProcessAppendWaitsOnePoll() async throws {
        var simulation = appWithExtension()
        simulation.action("drop the inbox") { app in
            try FileManager.default.removeItem(atPath: app.environment.storePath("visits.sqlite") + ".inbox")
        }
        // Checked right after the append, before the app's poll: the note may wait.
        try await simulation.replay([.action("an extension saves a note"), .action("save a note"), .wait(seconds: 1)])
        let failure = await #expect(throws: AppSimulationFailure.self) {
            try await simulation.replay([.action("an extension saves a note"), .action("drop the inbox"), .wait(seconds: 1)])
        }
        #expect(failure?.check == "acknowledged writes present")
        #expect(failure?.failedStep == 2)
        #expect(failure?.message.contains("missing") == true)
    }

    @Test("a visit the extension appends twice is found applied twice")
    func visitAppliedTwiceIsFound() async throws {
        var simulation = appWithExtension()
        simulation.action("an extension logs a visit, and again after a timeout") { app in
            try app.appendToInboxFromAnotherProcess(VisitLogged(place: "place \(app.number)"))
            try app.appendToInboxFromAnotherProcess(VisitLogged(place: "place \(app.number)"))
        }
        let failure = await #expect(throws: AppSimulationFailure.self) {
            try await simulation.replay([.action("an extension logs a visit, and again after a timeout"), .wait(seconds: 1)])
        }
        #expect(failure?.check == "each visit is applied once")
        #expect(failure?.failedStep == 1)
    }

    @Test("seeds run side by side pass as one after another do, and throw the same failure: the lowest failing seed's, shrunk")
    func concurrentSeedsThrowTheSerialFailure() async throws {
        var correct = visitsApp(tallyOutsideStore: false)
        correct.concurrentSeeds = 3
        try await correct.run(seeds: 0..<6, steps: 60)

        var planted = visitsApp(tallyOutsideStore: true)
        let serial = try #require(await #expect(throws: AppSimulationFailure.self) { try await planted.run(seeds: 0..<10, steps: 60) })
        planted.concurrentSeeds = 3
        let concurrent = try #require(await #expect(throws: AppSimulationFailure.self) { try await planted.run(seeds: 0..<10, steps: 60) })
        #expect(concurrent.seed == serial.seed)
        #expect(concurrent.failedStep == serial.failedStep)
        #expect(concurrent.steps == serial.steps)
        #expect(concurrent.description == serial.description)
    }

    @Test("the same seed draws the same steps")
    func sameSeedSameSteps() {
        let simulation = visitsApp(tallyOutsideStore: false)
        #expect(simulation.steps(seed: 7, count: 50) == simulation.steps(seed: 7, count: 50))
        #expect(simulation.steps(seed: 7, count: 50) != simulation.steps(seed: 8, count: 50))
    }
}
