package import DiskModel
import Foundation
import ProtectedStore
import ProtectedData
import SecureKeys
import SystemPackage

/// An invariant that did not hold and the step after which it was found.
///
/// When the command language can say it, it also holds the `expect` line that fails the same way in a script.
public struct Violation: Error, Sendable, CustomStringConvertible {
    /// The command (1-based) after which the check failed.
    public let step: Int
    /// The rule that did not hold.
    ///
    /// It is one of the design's invariants (README.md, "The design in one page"), or the oracle's model of the
    /// device and its errors.
    public let invariant: String
    /// What was wrong, in words.
    public let message: String
    /// The `expect` line that fails the same way in a script, when the language can say it.
    public let expectation: Expectation?

    /// `step N: invariant: message`.
    public var description: String { "step \(step): \(invariant): \(message)" }
}

/// One simulated run, with its commands, a line of trace per command, and the first violation if any.
public struct SimulationRun: Sendable {
    /// The commands that ran, or empty when the run did not record them.
    ///
    /// A long seed's run does not record them; its commands can be drawn again from the seed, as ``Shrinker`` does.
    public let commands: [ScenarioCommand]
    /// One line per command, giving the command and the state after it.
    ///
    /// It is empty when the run did not record them.
    public let trace: [String]
    /// How many commands ran, recorded or not.
    public let steps: Int
    /// The first invariant that did not hold, or `nil`.
    public let violation: Violation?
    /// What the run's power cuts lost and what was checked after them.
    public var powerCuts = PowerCutTally()
    /// What the run exercised beyond the everyday commands.
    ///
    /// That is passcode changes, wipes, the quarantine, large values, reads and another process's appends.
    public var coverage = CoverageTally()
}

/// The sizes of what a simulated run still keeps after a step.
///
/// They are bounded whatever the seed's length when the run does not record its commands and trace.
package struct RetainedRecords: Sendable, Equatable {
    /// Commands recorded.
    package var commands: Int
    /// Trace lines recorded.
    package var trace: Int
    /// Journal entries not yet absorbed and checked.
    package var journal: Int
    /// `ui` operations that ran and were not yet checked against the submission order.
    package var ran: Int
    /// `ui` operations submitted after the last one found to have run.
    package var submitted: Int
    /// Values the session keeps to search the files for.
    package var writtenValues: Int
    /// Journal entries the run made in all, forgotten ones included.
    ///
    /// The entries are not kept, only their count.
    package var journaled = 0
}

/// What the power cuts of a run (or of many) lost, and what was checked after them.
public struct PowerCutTally: Sendable, Equatable {
    /// Power cuts.
    public var cuts = 0
    /// Unsynced 512-byte sectors and truncations pending at the cuts.
    public var unsyncedPieces = 0
    /// Of those, the ones the cuts lost.
    public var droppedPieces = 0
    /// Unsynced file creations, renames and removals pending at the cuts.
    public var unsyncedEntryChanges = 0
    /// Of those, the ones the cuts lost.
    public var droppedEntryChanges = 0
    /// Acknowledged values compared with the store at its first ready after a cut (each key holding one counts).
    public var acknowledgedWritesChecked = 0
    /// `PRAGMA integrity_check` runs at the first ready after a cut.
    public var integrityChecks = 0

    /// An empty tally.
    public init() {}

    /// Counts one power cut and what it lost (a `device power-cut`, or a cut a fault plan made inside a command).
    mutating func count(_ report: SimulatedDisk.PowerCutReport) {
        cuts += 1
        unsyncedPieces += report.unsyncedPieces
        droppedPieces += report.droppedPieces
        unsyncedEntryChanges += report.unsyncedEntryChanges
        droppedEntryChanges += report.droppedEntryChanges
    }

    /// Adds another tally.
    public static func += (lhs: inout PowerCutTally, rhs: PowerCutTally) {
        lhs.cuts += rhs.cuts
        lhs.unsyncedPieces += rhs.unsyncedPieces
        lhs.droppedPieces += rhs.droppedPieces
        lhs.unsyncedEntryChanges += rhs.unsyncedEntryChanges
        lhs.droppedEntryChanges += rhs.droppedEntryChanges
        lhs.acknowledgedWritesChecked += rhs.acknowledgedWritesChecked
        lhs.integrityChecks += rhs.integrityChecks
    }

    /// `N power cuts: …` for the simulator's summary.
    public var summary: String {
        "\(cuts) power cuts: lost \(droppedPieces) of \(unsyncedPieces) unsynced sectors and \(droppedEntryChanges) of "
            + "\(unsyncedEntryChanges) unsynced file creations/renames/removals; after them \(acknowledgedWritesChecked) "
            + "acknowledged values compared, \(integrityChecks) integrity checks, 0 lost"
    }
}

/// Runs random command sequences on the real stack, checking invariants after every step.
///
/// The stack is real SQLCipher files, real libsodium keys and a test clock. After every step it checks the design's
/// invariants (README.md) and an oracle's model of the device.
@MainActor
public enum Simulator {
    /// The grace period the simulated devices use.
    static let gracePeriod: Duration = .seconds(10)

    /// Simulates `steps` commands drawn from `seed`. The same seed gives the same commands and trace.
    ///
    /// With `recording` off the run keeps neither its commands nor its trace, so that a seed of any length
    /// holds bounded memory; ``SimulationRun/steps`` still counts them.
    ///
    /// `afterEachStep`, for tests, is called with the step's number, and the sizes of what the run still keeps,
    /// once its checks passed (to sample what the process holds while a long seed runs).
    package static func run(
        seed: UInt64, steps: Int, plantedFault: PlantedFault? = nil, recording: Bool = true,
        afterEachStep: ((Int, RetainedRecords) -> Void)? = nil
    ) async throws -> SimulationRun {
        var generator = CommandGenerator(seed: seed)
        var remaining = steps
        return try await simulate(seed: seed, plantedFault: plantedFault, recording: recording, afterEachStep: afterEachStep) { model in
            guard remaining > 0 else { return nil }
            remaining -= 1
            return generator.next(model)
        }
    }

    /// Runs exactly `commands`, with the same checks.
    package static func replay(
        _ commands: [ScenarioCommand], seed: UInt64, plantedFault: PlantedFault? = nil
    ) async throws -> SimulationRun {
        var iterator = commands.makeIterator()
        return try await simulate(seed: seed, plantedFault: plantedFault, recording: true) { _ in iterator.next() }
    }

    private static func simulate(
        seed: UInt64, plantedFault: PlantedFault?, recording: Bool,
        afterEachStep: ((Int, RetainedRecords) -> Void)? = nil, next: (SimulationModel) -> ScenarioCommand?
    ) async throws -> SimulationRun {
        let directory = try TemporaryStateDirectories.make(prefix: "protected-store-sim")
        defer { TemporaryStateDirectories.remove(directory) }
        let session = try ScenarioSession(stateDirectory: directory, kdf: .minimal, output: { _ in })
        session.plantedFault = plantedFault
        // The simulator searches the files for its seed's value prefixes: the session need not keep every value.
        session.recordsWrittenValues = false
        var model = SimulationModel(gracePeriod: gracePeriod)
        var commands: [ScenarioCommand] = []
        var trace: [String] = []
        var step = 0
        var journalSeen = 0
        // The journal entries invariant 2 was checked on (a step whose boot failed checks none).
        var journalChecked = 0
        // Where the `ui` operations that ran so far were found in the submission order (invariant 2).
        var submittedPosition = 0
        var seenClassKeys: [SecureBytes] = []
        var lastComparedStore: StoreView?
        var tally = PowerCutTally()
        var coverage = CoverageTally()
        var checkAfterPowerCut = false
        // The app a fault hit: it may present the disk's error, and wait for protected data after a failed attach.
        var faultedApp: ObjectIdentifier?
        while let command = next(model) {
            step += 1
            if recording { commands.append(command) }
            let wipedBefore = model.wiped
            let faulted = session.plannedFault != nil && !command.isFault
            let before = model
            let keybagBefore = faulted ? keybag(session) : nil
            if case .damage(.inbox, let damage) = command {
                learnBeforeDamage(damage, session: session, model: &model, coverage: &coverage)
            }
            let expectedError = model.apply(command)
            coverage.count(command, expectedError: expectedError, wipedBefore: wipedBefore)
            await session.execute(command)
            var faultFired = false
            if faulted, let plan = session.lastFault, !plan.failures.isEmpty || plan.powerCutReport != nil || plan.powerCutError != nil {
                faultFired = true
                let cut = plan.powerCutReport != nil || plan.powerCutError != nil
                coverage.countFault(plan.fault, command: command, failed: session.lastError != nil)
                if let controller = session.controller, !cut { faultedApp = ObjectIdentifier(controller) }
                learn(
                    after: command, cut: cut, before: before, expectedError: expectedError, keybagBefore: keybagBefore,
                    session: session, model: &model)
                if let report = plan.powerCutReport {
                    tally.count(report)
                    checkAfterPowerCut = true
                }
            } else if faulted {
                coverage.faultsUnused += 1
            }
            if command == .deviceReboot || command.isPowerCut {
                if let atBoot = model.passcodeAtBoot { model.passcode = keybag(session) == atBoot.keybag ? atBoot.new : atBoot.old }
                if model.attemptMayBeUnrecorded, let device = session.device {
                    // A reboot reads the count the refused attempt left, durable or not, and the device acts on it;
                    // only a power cut decides whether it stays (a rename whose folder was never synced may be
                    // dropped: the attempt was never answered, so it need not count). Until then the next boot's
                    // count is read from the device again.
                    model.attemptMayBeUnrecorded = command == .deviceReboot
                    model.wiped = device.lockState == .wiped
                    model.failures = device.failedPasscodeAttempts
                    model.reboot()
                }
            }
            if case .damage(let file, let damage) = command, file != .inbox, session.lastError == nil {
                coverage.countDamage(file, damage)
            }
            model.absorb(session.journal[journalSeen...])
            coverage.count(session.journal[journalSeen...])
            journalSeen = session.journal.count
            // Sticky: once the inbox key existed it must stay (a power cut losing it is a violation: appends fail).
            model.storeAttachedOnce = model.storeAttachedOnce || SecureFile.exists(session.storeFiles.inboxKey)
            if case .devicePowerCut = command, let report = session.lastPowerCut {
                tally.count(report)
                checkAfterPowerCut = true
            }
            // A wiped key holds no secret and no memory mapping left to check: only the live ones are kept.
            seenClassKeys.removeAll { $0.isWiped }
            if let device = session.device {
                for protectionClass in [ProtectionClass.complete, .completeUnlessOpen] {
                    if let key = device.classKey(protectionClass), !seenClassKeys.contains(where: { $0 === key }) {
                        seenClassKeys.append(key)
                    }
                }
            }
            let controller = session.controller
            if recording {
                trace.append(
                    "\(step): \(command.scriptLine) → device \(session.deviceStateWord), store \(controller?.phase.name ?? "not-running"), "
                        + "queued \(controller?.queuedOperationCount ?? 0), error \(session.lastError?.code.name ?? "none")")
            }
            if !model.pendingInbox.isEmpty, model.acknowledgedPending.count < model.pendingInbox.count,
                session.controller?.phase == .ready, (try? session.inbox.pendingCount()) == 0
            {
                // The ready store's inbox is empty: a failed append that was there has been merged, or it never was.
                model.pendingInbox.removeAll { $0.optional }
            }
            let faultedAppRuns = faultedApp != nil && session.controller.map(ObjectIdentifier.init) == faultedApp
            if let failure = await check(
                session: session, model: model, expectedError: expectedError, faultFired: faultFired, faultedAppRuns: faultedAppRuns,
                seenClassKeys: seenClassKeys, seed: seed, lastComparedStore: &lastComparedStore,
                journalChecked: &journalChecked, submittedPosition: &submittedPosition)
            {
                let violation = Violation(
                    step: step, invariant: failure.invariant, message: failure.message, expectation: failure.expectation)
                await session.end()  // the app ends before its directory goes (`ScenarioSession.end()`)
                return SimulationRun(commands: commands, trace: trace, steps: step, violation: violation, powerCuts: tally, coverage: coverage)
            }
            if model.deviceFileRestored, !model.bootFailed, command == .deviceReboot || command.isPowerCut {
                model.deviceFileRestored = false
                coverage.bootsAfterRestore += 1
            }
            // The first time the store is ready after a power cut: every page decrypts and checks out, and every
            // acknowledged write was just compared (above, as after any attach).
            if checkAfterPowerCut, session.controller?.phase == .ready {
                checkAfterPowerCut = false
                tally.acknowledgedWritesChecked += model.contents.count
                tally.integrityChecks += 1
                if let failure = await session.execute(.expect(.integrityOK)) {
                    let violation = Violation(
                        step: step, invariant: "power cut: store intact",
                        message: "integrity check after a power cut: \(failure)", expectation: .integrityOK)
                    await session.end()
                    return SimulationRun(
                        commands: commands, trace: trace, steps: step, violation: violation, powerCuts: tally, coverage: coverage)
                }
            }
            // Keep only what a later check still needs: the journal entries absorbed and checked, the
            // `ui` operations found in the submission order and the submissions before them are not looked at again.
            let forget = min(journalSeen, journalChecked)
            session.forgetJournal(first: forget)
            journalSeen -= forget
            journalChecked -= forget
            model.submitted.removeFirst(submittedPosition)
            submittedPosition = 0
            afterEachStep?(
                step,
                RetainedRecords(
                    commands: commands.count, trace: trace.count, journal: session.journal.count, ran: session.ran.count,
                    submitted: model.submitted.count, writtenValues: session.writtenValues.count,
                    journaled: session.journaledCount))
        }
        await session.end()
        return SimulationRun(commands: commands, trace: trace, steps: step, violation: nil, powerCuts: tally, coverage: coverage)
    }

    /// The keybag file's bytes, empty when it is missing.
    ///
    /// They tell which passcode a boot will find.
    private static func keybag(_ session: ScenarioSession) -> [UInt8] {
        (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: session.stateDirectory + "/device/device.keybag")))) ?? []
    }

    /// Learns from the session after a command an I/O fault or a power cut hit.
    ///
    /// The model cannot predict how far the command got, so it learns that from the session, for this command only. A
    /// command that failed is not acknowledged: a store write may or may not have happened, an inbox append may or
    /// may not be in the inbox. The device's counter, lock state and wipe are read back; a passcode change took
    /// effect if its keybag reached the disk. A cut is a power cut: the app is gone, the device booted.
    private static func learn(
        after command: ScenarioCommand, cut: Bool, before: SimulationModel, expectedError: String?, keybagBefore: [UInt8]?,
        session: ScenarioSession, model: inout SimulationModel
    ) {
        let failed = session.lastError != nil
        switch command {
        case .put(let key, let value) where failed: model.uncertain[key, default: []].insert(value)
        case .delete(let key) where failed: model.uncertain[key, default: []].insert(nil)
        case .inboxPut where failed && expectedError == nil:
            if let last = model.pendingInbox.indices.last { model.pendingInbox[last].optional = true }
        default: break
        }
        if !cut, session.controller != nil {
            // A merge (after an append, at an attach) may be what failed: the records wait for the app's next poll.
            for index in model.pendingInbox.indices {
                model.pendingInbox[index].otherProcessAt = model.now
            }
        }
        let keybagNow = keybag(session)
        if cut {
            model.attemptMayBeUnrecorded = false
            if let device = session.device {
                model.failures = device.failedPasscodeAttempts
                model.wiped = device.lockState == .wiped
            }
            model.reboot()
            if case .deviceChangePasscode(_, let new, _) = command, expectedError == nil {
                model.passcode = keybagNow != keybagBefore ? new ?? "" : before.passcode
            } else if let atBoot = model.passcodeAtBoot {
                model.passcode = keybagNow == atBoot.keybag ? atBoot.new : atBoot.old
            }
            return
        }
        guard let device = session.device else { return }
        switch command {
        case .deviceUnlock, .deviceChangePasscode: model.attemptMayBeUnrecorded = true
        default: break
        }
        model.failures = device.failedPasscodeAttempts
        if model.failures == 0 { model.delayUntil = nil }
        if case .deviceUnlock = command, failed { learnRefusedAttempt(device: device, model: &model) }
        if case .deviceChangePasscode = command, failed { learnRefusedAttempt(device: device, model: &model) }
        if device.lockState != .wiped, session.deviceStateWord != model.deviceWord {
            // The attempt failed after the passcode was right (writing the reset counter): still locked.
            model.unlocked = before.unlocked
            model.unlockedSinceBoot = before.unlockedSinceBoot
            model.graceDeadline = before.graceDeadline
        }
        if case .deviceChangePasscode(_, let new, _) = command, expectedError == nil, failed {
            // In memory the old keybag stays; on disk the new one may have landed, for the next boot.
            model.passcode = before.passcode
            model.passcodeAtBoot = keybagNow != keybagBefore ? (keybagNow, new ?? "", before.passcode) : before.passcodeAtBoot
        }
    }

    /// Reads back the count, the delay and the wipe after a passcode attempt a fault stopped.
    ///
    /// The attempt may have been refused before it was checked, because its count could not be written; then it
    /// changed neither the count nor the delay, and erased nothing.
    private static func learnRefusedAttempt(device: KeybagDevice, model: inout SimulationModel) {
        model.wiped = device.lockState == .wiped
        model.delayUntil = device.passcodeRetryDelay.map { model.now + $0 }
    }

    /// Learns, before the inbox is damaged, which records the damage touches.
    ///
    /// They are read from the file (InboxRecord.scan). A record's length made to claim past the file's end makes that
    /// record unreadable, lost but reported (its bytes are moved to `<store>.inbox-damaged`), and leaves every record
    /// after it intact, still to be merged or quarantined. When the file is not the model's records exactly, the
    /// records are taken as uncertain.
    private static func learnBeforeDamage(
        _ damage: Damage, session: ScenarioSession, model: inout SimulationModel, coverage: inout CoverageTally
    ) {
        let bytes = (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: session.storeFiles.inbox)))) ?? []
        let (frames, problems) = InboxRecord.scan(bytes)
        guard case .setLength(let offset, _) = damage, problems.isEmpty, frames.count == model.pendingInbox.count,
            let index = frames.firstIndex(where: { $0.offset == offset })
        else {
            for index in model.pendingInbox.indices { model.pendingInbox[index].optional = true }
            return
        }
        coverage.damagedRecords += 1
        coverage.intactRecordsAfterDamage += frames.count - 1
        model.pendingInbox.remove(at: index)
    }

    /// The `expect` line that fails when acknowledged inbox records are missing from a ready store.
    ///
    /// It checks the value the last one that the app applies sets, else the quarantine they would fill
    /// (`expect inbox 0` holds when the records were dropped with the inbox).
    private static func unmergedExpectation(_ model: SimulationModel) -> Expectation {
        let waiting = model.acknowledgedPending
        if let last = waiting.last(where: { $0.kind == nil }), let value = last.value { return .value(key: last.key, value: value) }
        return .quarantined(model.quarantine.count + waiting.filter { $0.kind != nil }.count)
    }

    /// What the store looked like at the last full comparison with the model.
    private struct StoreView: Equatable {
        let coordinator: ObjectIdentifier?
        let journalCount: Int
    }

    struct Failure {
        let invariant: String
        let message: String
        let expectation: Expectation?
    }

    /// Checks invariant 9, that a wipe is final.
    ///
    /// The keybag and the device key never exist again, whatever happens after it (reboots, power cuts, launches),
    /// and the store is never ready again.
    static func checkWipe(session: ScenarioSession, model: SimulationModel) -> Failure? {
        // An erase a fault stopped is finished by the next attempt or boot: its key files may wait till then.
        guard model.wiped, session.device?.isErasePending != true else { return nil }
        // DeviceLayout (ProtectedData): device/device.keybag, hardware/uid.key.
        for name in ["device/device.keybag", "hardware/uid.key"] where SecureFile.exists(session.stateDirectory + "/" + name) {
            return Failure(
                invariant: "9 never brings an erased key back", message: "\(name) exists after the device was wiped",
                expectation: nil)
        }
        if let controller = session.controller, controller.phase == .ready || controller.coordinator != nil {
            return Failure(
                invariant: "9 a wiped device's store is never ready",
                message: "the store of a wiped device is \(controller.phase.name)\(controller.coordinator == nil ? "" : ", with a coordinator")",
                expectation: .store("waiting"))
        }
        return nil
    }

    /// A damaged key file or device file is reported, never repaired by replacing it.
    ///
    /// While it is damaged its bytes stay as the damage left them (not overwritten, not removed, so no new key and no
    /// reset counter), a boot fails (checked as the command's error), and an app whose class keys are held presents
    /// the damaged key file and never gets a store. After a restore, the boot from the restored keybag or state file
    /// finds the failed-attempt count the model holds (the passcode and the values are checked as always).
    static func checkDamage(session: ScenarioSession, model: SimulationModel) -> Failure? {
        if let file = model.damaged, let damaged = session.damagedFiles[file]?.damaged,
            ScenarioSession.contents(of: session.path(of: file)) != damaged
        {
            let now = SecureFile.exists(session.path(of: file)) ? "overwritten" : "removed"
            return Failure(
                invariant: "damage reported, never repaired by replacement",
                message: "the damaged \(file.rawValue) file (\(session.path(of: file))) was \(now)", expectation: nil)
        }
        if let file = model.damaged, let replaced = session.replacedFiles[file] {
            // A link or FIFO in a file's place stays what it is: never followed, opened, or taken for a new file.
            let path = session.path(of: file)
            let what = replaced.isLink ? "symbolic link" : "FIFO"
            if (try? Stat(FilePath(path), followTargetSymlink: false))?.type != (replaced.isLink ? .symbolicLink : .fifo) {
                return Failure(
                    invariant: "damage reported, never repaired by replacement",
                    message: "the \(what) put in place of the \(file.rawValue) file (\(path)) was \(SecureFile.exists(path) ? "replaced" : "removed")",
                    expectation: nil)
            }
            if replaced.movedAside, !SecureFile.exists(session.asidePath(of: file)) {
                return Failure(
                    invariant: "damage reported, never repaired by replacement",
                    message: "the \(file.rawValue) file moved aside to \(session.asidePath(of: file)) was removed", expectation: nil)
            }
        }
        // The store's key file, or one of the store's own files, damaged: the attach that meets it fails and
        // presents what it found — a damaged key file, a store file cut short (`store-damaged`), a link or a
        // FIFO in a store file's place (`io-error`) — and never makes a new store in its place.
        // The class is the one the attach used: the model's for a damaged key file (the session then cannot read
        // it), the key file's for a store file (the model's may be the class of a first launch that a fault
        // stopped before the key file was made).
        if let file = model.damaged, file == .storeKey || file.isStoreFile, let controller = session.controller,
            let storeClass = file.isStoreFile ? controller.configuration.store.protectionClass : model.storeClass
        {
            let expected: StoreError.Code =
                file == .storeKey ? .keyFileDamaged : session.replacedFiles[file] != nil ? .ioError : .storeDamaged
            if controller.phase == .ready || controller.coordinator != nil {
                return Failure(
                    invariant: "damage reported, never repaired by replacement",
                    message: file == .storeKey
                        ? "the store attached with its key file damaged" : "the store attached with its \(file.rawValue) file damaged",
                    expectation: .store("failed"))
            }
            let presented = controller.presentedError?.code.name ?? "none"
            if model.keysHeld(storeClass), presented != expected.name {
                return Failure(
                    invariant: "damage reported, never repaired by replacement",
                    message: "the store's \(file.rawValue) file is damaged and its keys are held, but the app presented \(presented)",
                    expectation: .presentedError(expected.name))
            }
        }
        if model.deviceFileRestored, !model.bootFailed, !model.attemptMayBeUnrecorded, let device = session.device,
            device.failedPasscodeAttempts != model.failures
        {
            return Failure(
                invariant: "damage reported, never repaired by replacement",
                message: "after a restore the device counts \(device.failedPasscodeAttempts) failed attempts, expected \(model.failures)",
                expectation: nil)
        }
        return nil
    }

    /// Checks invariant 7, that a record of a kind the app cannot apply stays quarantined, in order, until discarded.
    private static func checkQuarantine(_ coordinator: StoreCoordinator, model: SimulationModel) async -> Failure? {
        guard let records = try? await coordinator.quarantinedInboxRecords() else {
            return Failure(invariant: "7 inbox records merged or quarantined", message: "the quarantine cannot be read", expectation: nil)
        }
        let kinds = records.map { $0.kind ?? "?" }
        guard kinds != model.quarantine else { return nil }
        return Failure(
            invariant: "7 inbox records merged or quarantined",
            message: "quarantined \(kinds), expected \(model.quarantine)", expectation: .quarantined(model.quarantine.count))
    }

    private static func check(
        session: ScenarioSession, model: SimulationModel, expectedError: String?, faultFired: Bool, faultedAppRuns: Bool,
        seenClassKeys: [SecureBytes], seed: UInt64, lastComparedStore: inout StoreView?, journalChecked: inout Int,
        submittedPosition: inout Int
    ) async -> Failure? {
        if let finding = model.finding {
            return Failure(invariant: finding.invariant, message: finding.message, expectation: finding.expectation)
        }
        let gotError = session.lastError?.code.name
        // Under a fault that fired, the command may end in the disk's error instead (any typed error).
        // An app whose store a fault kept from opening presents the disk's error, and its operations fail with it.
        let presentedByFault = faultedAppRuns && gotError != nil && gotError == session.controller?.presentedError?.code.name
        if gotError != expectedError, !(faultFired && gotError != nil), !presentedByFault {
            return Failure(
                invariant: Shrinker.commandOutcome,
                message: "expected error \(expectedError ?? "none"), got \(gotError ?? "none")",
                expectation: .error(expectedError ?? "none"))
        }
        if let failure = checkDamage(session: session, model: model) { return failure }
        if model.bootFailed { return nil }
        if session.deviceStateWord != model.deviceWord {
            return Failure(
                invariant: "oracle: device state", message: "expected device \(model.deviceWord), got \(session.deviceStateWord)",
                expectation: .device(model.deviceWord))
        }
        // 9. An erased key never comes back: a wiped device whose erase is not pending has no key file left.
        if let device = session.device, device.lockState == .wiped, !device.isErasePending,
            let left = device.keyFilePaths.first(where: SecureFile.exists)
        {
            return Failure(
                invariant: "9 no erased key comes back", message: "the device is wiped but \(left) is still on disk",
                expectation: nil)
        }
        let storeClass = session.controller?.configuration.store.protectionClass ?? model.storeClass ?? .complete
        if let device = session.device {
            for protectionClass in ProtectionClass.allCases where device.isProtectedDataAvailable(for: protectionClass) != model.keysHeld(protectionClass) {
                return Failure(
                    invariant: "oracle: key availability",
                    message: "class \(protectionClass.name) should be \(model.keysHeld(protectionClass) ? "available" : "unavailable")",
                    expectation: protectionClass == storeClass ? .protectedData(available: model.keysHeld(protectionClass)) : nil)
            }
        }
        if let failure = checkWipe(session: session, model: model) { return failure }
        // 6. After the grace period no class-A/B secret remains in memory.
        if !model.keysHeld(.complete), let live = seenClassKeys.first(where: { !$0.isWiped }) {
            return Failure(invariant: "6 keys wiped after the grace period", message: "a class A/B key (\(live)) was not wiped", expectation: nil)
        }
        if let controller = session.controller {
            let ready = controller.phase == .ready
            let assigned = controller.coordinator != nil
            // 1. coordinator != nil ⇔ a store is attached and its key is usable.
            if assigned != ready {
                return Failure(
                    invariant: "1 coordinator ⇔ attached store",
                    message: "coordinator \(assigned ? "assigned" : "nil") while the store is \(controller.phase.name)",
                    expectation: .coordinator(assigned: ready))
            }
            if assigned, storeClass != .completeUnlessOpen, !model.keysHeld(storeClass) {
                return Failure(
                    invariant: "1 coordinator ⇔ attached store",
                    message: "coordinator assigned for a class-\(storeClass.name) store whose keys are gone",
                    expectation: .coordinator(assigned: false))
            }
            // The deferred setup completes: unlocked and still waiting is a missed event.
            if model.unlocked && controller.phase == .waitingForProtectedData && !faultedAppRuns {
                return Failure(
                    invariant: "deferred setup", message: "the device is unlocked but the store still waits",
                    expectation: .store("ready"))
            }
            if !model.unlockedSinceBoot && storeClass != .none && ready {
                return Failure(
                    invariant: "1 coordinator ⇔ attached store", message: "the store is ready before the first unlock",
                    expectation: .store("waiting"))
            }
            // 3. Errors are presented only when protected data was available (the simulation damages nothing
            // but the files it names: a damaged store key file or store file is presented, checked in
            // `checkDamage`).
            if let presented = controller.presentedError, !faultedAppRuns, model.damaged != .storeKey,
                model.damaged?.isStoreFile != true
            {
                return Failure(
                    invariant: "3 errors presented only when data was available", message: "presented \(presented)",
                    expectation: .presentedError("none"))
            }
            // 4. Every acknowledged write is readable. The store can only have changed through the journal or a
            // new attach (a merge), so it is re-read when either moved.
            let storeView = StoreView(coordinator: controller.coordinator.map(ObjectIdentifier.init), journalCount: session.journaledCount)
            if ready, let coordinator = controller.coordinator, storeView != lastComparedStore {
                lastComparedStore = storeView
                guard let entries = try? await coordinator.allEntries() else {
                    return Failure(invariant: "4 acknowledged writes readable", message: "the ready store cannot be read", expectation: nil)
                }
                let stored = Dictionary(uniqueKeysWithValues: entries.map { ($0.key, $0.value) })
                for key in Set(stored.keys).union(model.contents.keys).sorted()
                where stored[key] != model.contents[key] && !(model.uncertain[key]?.contains(stored[key]) ?? false) {
                    return Failure(
                        invariant: "4 acknowledged writes readable",
                        message: "key \(key): expected \(model.contents[key] ?? "missing"), stored \(stored[key] ?? "missing")",
                        expectation: model.contents[key].map { .value(key: key, value: $0) } ?? .missing(key: key))
                }
                if let failure = await checkQuarantine(coordinator, model: model) { return failure }
            }
        }
        // Acknowledged inbox appends are never lost: a ready store has merged them all (an attach merges the
        // whole inbox, and an append to a ready store is merged before the command returns); while the store
        // is not ready, they wait in the inbox file.
        // Another process's append waits for the app's next poll, at most one interval.
        if let controller = session.controller, controller.phase == .ready,
            model.acknowledgedPending.count > model.inboxRecordsAReadyStoreMayHold
        {
            return Failure(
                invariant: "4 acknowledged writes readable",
                message: "\(model.acknowledgedPending.count) acknowledged inbox write(s) not merged into the ready store",
                expectation: unmergedExpectation(model))
        }
        let acknowledged = model.acknowledgedPending.count
        if acknowledged > 0, session.controller?.phase != .ready {
            let waiting = (try? session.inbox.pendingCount()) ?? 0
            if waiting < acknowledged {
                return Failure(
                    invariant: "4 acknowledged writes readable",
                    message: "\(acknowledged) acknowledged inbox write(s), \(waiting) in the inbox",
                    expectation: .inbox(acknowledged))
            }
        }
        // 2. No UI operation runs before setup completed; each runs once, in submission order.
        for case .ran(let name, let storeWasReady) in session.journal where !storeWasReady {
            return Failure(invariant: "2 operations run only when ready", message: "\(name) ran before setup completed", expectation: nil)
        }
        journalChecked = session.journal.count
        // The names checked at earlier steps were forgotten (as were the submissions before the last one found):
        // each name is looked for after the one before it, so checking only the new ones finds the same.
        var position = submittedPosition
        for name in session.ran {
            guard let found = model.submitted[position...].firstIndex(of: name) else {
                return Failure(
                    invariant: "2 operations once, in order",
                    message: "\(name) ran out of order or twice (ran since the last step checked: \(session.ran))", expectation: nil)
            }
            position = found + 1
        }
        session.forgetRan(first: session.ran.count)
        submittedPosition = position
        // 5. No file holds a stored value, or SQLite's header, in the clear.
        // Every generated value starts with one of the seed's prefixes: searching for those finds any of them.
        if let finding = session.plaintextFindings(of: CommandGenerator.valuePrefixes(seed: seed), onlyChanged: true).first {
            return Failure(invariant: "5 no plaintext on disk", message: finding, expectation: .noPlaintext)
        }
        return nil
    }
}
