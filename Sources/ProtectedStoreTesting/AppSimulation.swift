internal import DiskModel
import Foundation
public import ProtectedStore
internal import SecureKeys

/// A seeded simulation of an app on a simulated device, for the app's own tests.
///
/// It draws steps, runs them on a ``ProtectedStoreTestEnvironment``, and after every step checks the library's
/// invariants and the app's. The steps are locked background launches, locks and unlocks with their grace period,
/// reboots, crashes (one inside the inbox merge), power cuts that drop or tear what was not synced, I/O errors in the
/// next step, damage to the store's files and its restore, and the app's own actions. Each run starts with the app
/// launched once on the unlocked device, as after its installation, so its store exists.
///
/// ```swift
/// var simulation = AppSimulation { app in
///     app.environment.storeConfiguration()
/// }
/// simulation.action("save") { app in
///     try app.put("note-\(app.number)", "text")
/// }
/// simulation.invariant("no empty value") { app in
///     let empty = try await app.coordinator.read { db in
///         try db.scalar("SELECT count(*) FROM entries WHERE value = ''")?.int64 ?? 0
///     }
///     return empty == 0 ? nil : "\(empty) empty values"
/// }
/// try await simulation.run(seeds: 0..<20, steps: 100)
/// ```
///
/// The same seed gives the same steps and the same run. A failure is shrunk to the fewest steps that still
/// fail the same check, and thrown as an ``AppSimulationFailure`` that prints those steps — to pin with
/// ``replay(_:)`` as a regression test — and the seed that replays the whole run.
@MainActor
public struct AppSimulation {
    /// One of the app's own actions, a named closure drawn with its weight.
    public struct Action {
        /// The action's name, as a step prints it.
        public let name: String
        /// How often it is drawn, relative to the other actions and the device's steps.
        public let weight: Int
        /// What the app does.
        ///
        /// An error it throws fails the run.
        public let body: @MainActor (AppSimulationContext) async throws -> Void
    }

    /// One of the app's invariants, a named check of its data.
    ///
    /// It runs after every step while the store is ready.
    public struct Invariant {
        /// The invariant's name, as a failure prints it.
        public let name: String
        /// Returns what is wrong, or `nil` when the invariant holds.
        ///
        /// An error it throws fails the run too.
        public let check: @MainActor (AppSimulationContext) async throws -> String?
    }

    /// The app's store, configured as the app does, in the environment's state directory.
    public let store: @MainActor (AppSimulationContext) -> StoreConfiguration
    /// How long class A and B keys stay after a lock.
    public var gracePeriod: Duration
    /// The app's actions.
    public private(set) var actions: [Action] = []
    /// The app's invariants.
    public private(set) var invariants: [Invariant] = []
    /// How many seeds ``run(seeds:steps:)`` runs at once; one by default.
    ///
    /// Each seed's run has an environment, a state directory and a simulated disk of its own, and the runs take
    /// turns on the main actor while their stores work on threads of their own: with a few at once the processors
    /// stay busy. `ProcessInfo.processInfo.activeProcessorCount` is a good number. Raise it only when the app's
    /// actions, invariants and store configuration keep their state in the run's ``AppSimulationContext`` (its
    /// store, its ``AppSimulationContext/appDirectory``), never in state the runs would share. The runs and what
    /// ``run(seeds:steps:)`` throws are the same at any number: the lowest failing seed's failure, shrunk.
    public var concurrentSeeds = 1

    /// A simulation of the app whose store `store` configures (path, protection class, migrator, inbox
    /// handlers).
    ///
    /// - Parameters:
    ///   - gracePeriod: how long class A and B keys stay after a lock.
    ///   - store: the app's store configuration, in the run's environment (its
    ///     ``ProtectedStoreTestEnvironment/storePath(_:)`` for the path; ``AppSimulationContext/appDirectory``
    ///     for the app's own files).
    public init(
        gracePeriod: Duration = .seconds(10), store: @escaping @MainActor (AppSimulationContext) -> StoreConfiguration
    ) {
        self.gracePeriod = gracePeriod
        self.store = store
    }

    /// Adds one of the app's actions.
    ///
    /// - Parameters:
    ///   - name: its name, unique among the actions (a step names it).
    ///   - weight: how often it is drawn (the device's steps weigh 1 to 3 each).
    ///   - body: what the app does; it runs while the app runs (the simulation launches it first, in the
    ///     background when the device is locked), and must not wait for the store: submit what needs it.
    public mutating func action(
        _ name: String, weight: Int = 2, _ body: @escaping @MainActor (AppSimulationContext) async throws -> Void
    ) {
        actions.append(Action(name: name, weight: max(1, weight), body: body))
    }

    /// Adds one of the app's invariants, checked after every step while the store is ready.
    ///
    /// - Parameters:
    ///   - name: its name, as a failure prints it.
    ///   - check: returns what is wrong, or `nil` when the invariant holds.
    public mutating func invariant(_ name: String, _ check: @escaping @MainActor (AppSimulationContext) async throws -> String?) {
        invariants.append(Invariant(name: name, check: check))
    }

    // MARK: Running

    /// Runs `steps` steps for each seed, and throws the first failure, shrunk.
    ///
    /// The seeds start in order, ``concurrentSeeds`` at a time, and none starts after one failed; the failure
    /// thrown is the lowest failing seed's, as when they run one after another.
    ///
    /// - Parameters:
    ///   - seeds: the seeds to run.
    ///   - steps: how many steps each run draws.
    /// - Throws: an ``AppSimulationFailure`` for the first seed that fails; an environment that cannot be set up.
    public func run(seeds: Range<UInt64>, steps: Int) async throws {
        // The runs that failed, by seed: the steps each drew and the check that failed, or the error that stopped it.
        var failures: [UInt64: Result<Failed, any Error>] = [:]
        let shared = Shared(self)
        await withTaskGroup(of: (seed: UInt64, outcome: Result<Failed?, any Error>).self) { group in
            var unstarted = seeds.makeIterator()
            var running = 0
            while true {
                while running < max(1, concurrentSeeds), failures.isEmpty, let seed = unstarted.next() {
                    group.addTask { (seed, await shared.outcome(seed: seed, steps: steps)) }
                    running += 1
                }
                guard let (seed, outcome) = await group.next() else { break }
                running -= 1
                switch outcome {
                case .success(nil): break
                case .success(let failed?): failures[seed] = .success(failed)
                case .failure(let error): failures[seed] = .failure(error)
                }
            }
        }
        guard let (seed, outcome) = failures.min(by: { $0.key < $1.key }) else { return }
        let (drawn, found) = try outcome.get()
        throw try await shrunkFailure(seed: seed, stepCount: steps, drawn: drawn, found: found)
    }

    /// Runs the `steps` steps `seed` draws, and throws its failure, shrunk.
    ///
    /// - Parameters:
    ///   - seed: the seed (the same seed draws the same steps).
    ///   - steps: how many steps to draw.
    /// - Throws: an ``AppSimulationFailure``; an environment that cannot be set up.
    public func run(seed: UInt64, steps: Int) async throws {
        guard let (drawn, found) = try await outcome(seed: seed, steps: steps).get() else { return }
        throw try await shrunkFailure(seed: seed, stepCount: steps, drawn: drawn, found: found)
    }

    /// The simulation, as the runs that run at once share it: a reference on the main actor, where they all run.
    @MainActor private final class Shared {
        let simulation: AppSimulation
        init(_ simulation: AppSimulation) { self.simulation = simulation }
        func outcome(seed: UInt64, steps: Int) async -> Result<Failed?, any Error> {
            await simulation.outcome(seed: seed, steps: steps)
        }
    }

    /// A run that failed: the steps it drew, and the check that failed.
    typealias Failed = (drawn: [AppSimulationStep], found: Found)

    /// Runs the `steps` steps `seed` draws, unshrunk: `nil` when every check passed.
    private func outcome(seed: UInt64, steps: Int) async -> Result<Failed?, any Error> {
        let drawn = self.steps(seed: seed, count: steps)
        do {
            return .success(try await execute(drawn).map { (drawn, $0) })
        } catch {
            return .failure(error)
        }
    }

    /// The failure of the run of `seed`, which drew `drawn` and failed as `found` says, shrunk.
    private func shrunkFailure(seed: UInt64, stepCount: Int, drawn: [AppSimulationStep], found: Found) async throws
        -> AppSimulationFailure
    {
        let shrunk = try await shrink(Array(drawn.prefix(found.step + 1)), failure: found)
        return AppSimulationFailure(
            seed: seed, stepCount: stepCount, failedStep: found.step, check: shrunk.check, message: shrunk.message,
            steps: shrunk.steps)
    }

    /// Runs a pinned list of steps and throws if a check fails.
    ///
    /// The steps are the ones a failure printed.
    ///
    /// - Parameter steps: the steps.
    /// - Throws: an ``AppSimulationFailure`` (not shrunk again) naming the check that failed.
    public func replay(_ steps: [AppSimulationStep]) async throws {
        guard let found = try await execute(steps) else { return }
        throw AppSimulationFailure(
            seed: nil, stepCount: steps.count, failedStep: found.step, check: found.check, message: found.message,
            steps: Array(steps.prefix(found.step + 1)))
    }

    /// The steps `seed` draws.
    ///
    /// They are device steps and the app's actions, drawn by weight; now and then an I/O error before a step it
    /// applies to; now and then a damaged store file or key file, or a symbolic link or FIFO in place of one of
    /// SQLite's files, restored one to six steps later. I/O errors and
    /// damage come from streams of their own, so the other steps are the ones the seed drew without them.
    ///
    /// - Parameters:
    ///   - seed: the seed.
    ///   - count: how many steps.
    public func steps(seed: UInt64, count: Int) -> [AppSimulationStep] {
        var choices: [(step: AppSimulationStep, weight: Int)] = [
            (.launch, 1), (.lock, 3), (.unlock, 3), (.wait(seconds: 1), 1), (.passGracePeriod, 2), (.crash, 1),
            (.crashInsideMerge, 2), (.reboot, 1), (.powerCut(.drop, seed: 0), 1),
        ]
        for action in actions { choices.append((.action(action.name), action.weight)) }
        let total = choices.reduce(0) { $0 + $1.weight }
        var random = SplitMix64(seed: seed)
        // I/O errors come from a stream of their own, so a seed draws the same other steps as before they existed,
        // with an I/O error put before some of them.
        var faults = SplitMix64(seed: seed ^ 0x494F_4552_524F_5253)
        func draw() -> AppSimulationStep {
            var pick = Int(random.next() % UInt64(total))
            for (step, weight) in choices {
                if pick < weight {
                    guard case .powerCut = step else { return step }
                    let modes = AppSimulationStep.PowerCut.allCases
                    return .powerCut(modes[Int(random.next() % UInt64(modes.count))], seed: random.next() % 1_000_000)
                }
                pick -= weight
            }
            preconditionFailure("a pick below the total weight falls on a step")
        }
        // So does damage: now and then a file of the store is damaged, and restored a few steps later.
        var damages = SplitMix64(seed: seed ^ 0x4441_4D41_4745_5354)
        var restoreAfter: Int?
        var drawn: [AppSimulationStep] = []
        while drawn.count < count {
            if let left = restoreAfter {
                restoreAfter = left - 1
                if left == 0 {
                    restoreAfter = nil
                    drawn.append(.restoreDamage)
                    continue
                }
            } else if drawn.count + 2 < count, damages.next() % Self.damageOdds == 0 {
                // Never a key file's version byte (offset 4, after its magic): that is a format this version does
                // not know, not damage.
                let offset = Int(damages.next() % 60)
                let files = AppSimulationStep.Damage.SQLiteFile.allCases
                let damage: AppSimulationStep.Damage =
                    switch damages.next() % 4 {
                    case 0: .truncateStore(length: Int(damages.next() % 4096))
                    case 1: .flipKeyFileByte(offset: offset == 4 ? 5 : offset)
                    case 2: .linkInPlaceOf(files[Int(damages.next() % UInt64(files.count))])
                    default: .fifoInPlaceOf(files[Int(damages.next() % UInt64(files.count))])
                    }
                drawn.append(.damage(damage))
                restoreAfter = 1 + Int(damages.next() % 6)
                continue
            }
            let step = draw()
            if drawn.count + 1 < count, step.runsUnderIOError, faults.next() % Self.ioErrorOdds == 0 {
                let kinds = AppSimulationStep.IOError.allCases
                drawn.append(.ioError(kinds[Int(faults.next() % UInt64(kinds.count))], after: Int(faults.next() % 12)))
            }
            drawn.append(step)
        }
        return drawn
    }

    /// One step in this many, of those an I/O error may hit, comes after an ``AppSimulationStep/ioError(_:after:)``.
    static let ioErrorOdds: UInt64 = 12

    /// One step in this many, while no file is damaged, is an ``AppSimulationStep/damage(_:)``.
    static let damageOdds: UInt64 = 30

    /// A check that failed.
    ///
    /// It records after which step it failed, which check it was, and what it said.
    struct Found {
        var step: Int
        var check: String
        var message: String
    }

    /// Removes chunks of steps, then single steps, while the same check still fails (the harness's
    /// `Shrinker` approach, on the app's steps).
    private func shrink(_ failing: [AppSimulationStep], failure: Found) async throws -> (steps: [AppSimulationStep], check: String, message: String) {
        var steps = failing
        var found = failure
        var chunk = max(1, steps.count / 2)
        while true {
            var index = 0
            while index < steps.count {
                var candidate = steps
                candidate.removeSubrange(index..<min(index + chunk, candidate.count))
                if let again = try await execute(candidate), again.check == found.check {
                    steps = Array(candidate.prefix(again.step + 1))
                    found = again
                } else {
                    index += chunk
                }
            }
            if chunk == 1 { break }
            chunk = max(1, chunk / 2)
        }
        return (steps, found.check, found.message)
    }

    /// Runs `steps` on a new environment, checking after each.
    ///
    /// Returns the first check that fails, or `nil`.
    func execute(_ steps: [AppSimulationStep]) async throws -> Found? {
        let context = try AppSimulationContext(simulation: self)
        // The app as installed and opened once: its store exists, with its inbox key.
        try await context.perform(.launch, actions: actions)
        for (index, step) in steps.enumerated() {
            var failure: AppSimulationContext.CheckFailed?
            do {
                try await context.perform(step, actions: actions)
                failure = await context.check(invariants: invariants)
            } catch let failed as AppSimulationContext.CheckFailed {
                failure = failed
            } catch where context.faultExplains(error) {
                // A call the planned I/O error hit failed, saying why: not a finding. What it left is checked.
                await context.environment.settle()
                failure = await context.check(invariants: invariants)
            } catch {
                failure = .init(check: "step completes", message: "\(step) threw: \(error)")
            }
            if let failure {
                await context.end()
                return Found(step: index, check: failure.check, message: failure.message)
            }
        }
        await context.finish()
        return nil
    }
}

// The app's closures run on the main actor, where the simulation runs them: an action or an invariant is not
// sent elsewhere, and need not capture only what is `Sendable`.
@available(*, unavailable)
extension AppSimulation.Action: Sendable {}
@available(*, unavailable)
extension AppSimulation.Invariant: Sendable {}

/// What happens to the device or the app in one step of an ``AppSimulation``.
///
/// Its description is the Swift that writes it, so a failure's steps paste into ``AppSimulation/replay(_:)``.
public enum AppSimulationStep: Sendable, Hashable, CustomStringConvertible {
    /// The app launches, if it is not running (in the background when the device is locked).
    case launch
    /// The user locks the device.
    ///
    /// The grace period starts.
    case lock
    /// The user unlocks the device.
    case unlock
    /// The clock moves on by a few seconds (the inbox poll runs, the grace period goes on).
    case wait(seconds: Int)
    /// The clock moves past the grace period.
    ///
    /// Class A keys are gone if the device is locked.
    case passGracePeriod
    /// The app's process is killed.
    case crash
    /// The app is launched again and killed inside its inbox merge, after the records were applied and
    /// before the merge's transaction commits (nothing happens when the inbox is empty or the store locked).
    case crashInsideMerge
    /// The device reboots.
    ///
    /// The app dies, and the device is before its first unlock.
    case reboot
    /// The power goes.
    ///
    /// The app dies, the disk keeps what was synced and, by the mode, none, a prefix or a random part of what was not
    /// (`seed` picks which), and the device boots again, before its first unlock.
    case powerCut(PowerCut, seed: UInt64)
    /// One of the app's actions, by name.
    case action(String)
    /// The next step runs on a failing disk.
    ///
    /// Of the next step's file-system calls under the state directory (the store, its key files, its inbox, the
    /// device's files), the first `after` succeed and the next one fails as the ``IOError`` says; the calls after it
    /// succeed again, or — for ``IOError/diskFull`` and ``IOError/diskFailed`` — fail too until the step ends. Only a launch, an unlock, a wait, the end of the grace period or an action runs under it;
    /// before any other step it is dropped. The call that fails must fail with an error that says why, no
    /// acknowledged write may be lost, and an app whose store the fault kept from attaching must attach at its next
    /// launch.
    case ioError(IOError, after: Int)
    /// The app's process is killed, and one of its store's files is damaged on disk, durably.
    ///
    /// Until ``restoreDamage`` the store must not attach: a launch whose attach meets the damage fails and presents
    /// it (`store-damaged` for a store file cut short, `key-file-damaged` for its key file, `io-error` for a
    /// symbolic link or a FIFO in place of one of SQLite's files), and the damage stays as it is: the damaged
    /// bytes, the link or FIFO and the file moved aside are neither replaced nor removed. Nothing happens while an
    /// earlier damage is not restored, when a file whose bytes are damaged does not exist, or when something else
    /// than a regular file is where a link or FIFO would go.
    case damage(Damage)
    /// The app's process is killed, and the file the last ``damage(_:)`` changed gets its bytes back, as from a
    /// backup (a link or FIFO is removed and the file moved back).
    ///
    /// The app's next launch must attach, with every acknowledged write.
    case restoreDamage

    /// What a power cut keeps of the writes that were not synced.
    public enum PowerCut: String, Sendable, Hashable, CaseIterable {
        /// Every unsynced write is lost.
        case drop
        /// Each file keeps a random prefix of its unsynced writes, in 512-byte sectors.
        case tornSequence
        /// Each unsynced 512-byte sector is kept or lost at random.
        case tornOp

        /// The simulated disk's mode.
        var diskMode: SimulatedDisk.PowerCutMode {
            switch self {
            case .drop: .drop
            case .tornSequence: .tornSequence
            case .tornOp: .tornOp
            }
        }
    }

    /// How the failing call of an ``ioError(_:after:)`` fails.
    public enum IOError: String, Sendable, Hashable, CaseIterable {
        /// The disk is full (`ENOSPC`); nothing of the call is done.
        case noSpace
        /// The disk fails (`EIO`); nothing of the call is done.
        case diskError
        /// A write stores half of its bytes, then fails with `ENOSPC` (only writes are counted).
        case shortWrite
        /// The disk fills up and stays full: the call fails with `ENOSPC`, and so does every call after it until
        /// the step ends.
        case diskFull
        /// The disk fails and stays failed: the call fails with `EIO`, and so does every call after it until the
        /// step ends.
        case diskFailed

        /// The disk model's fault.
        var fault: DiskFaultPlan.Fault {
            switch self {
            case .noSpace, .diskFull: .noSpace
            case .diskError, .diskFailed: .ioError
            case .shortWrite: .shortWrite
            }
        }

        /// Whether the calls after the failing one fail too.
        var persistence: DiskFaultPlan.Persistence {
            switch self {
            case .noSpace, .diskError, .shortWrite: .transient
            case .diskFull, .diskFailed: .persistent
            }
        }
    }

    /// How a ``damage(_:)`` step damages a file of the app's store.
    public enum Damage: Sendable, Hashable, CustomStringConvertible {
        /// The store file is cut to `length` bytes, shorter than its first page.
        ///
        /// A file of `length` bytes or fewer loses its last byte.
        case truncateStore(length: Int)
        /// Every bit of the byte at `offset` of the store's key file is inverted.
        ///
        /// In a file of `offset` bytes or fewer it is the last byte.
        case flipKeyFileByte(offset: Int)
        /// One of SQLite's files of the store is moved aside, and a symbolic link to it put in its place (or where
        /// it would be, when it is not there). The shared-memory index, which SQLite rebuilds, is removed instead.
        ///
        /// An attach must not follow the link: it presents `io-error`.
        case linkInPlaceOf(SQLiteFile)
        /// One of SQLite's files of the store is moved aside, and a FIFO put in its place (or where it would be,
        /// when it is not there). The shared-memory index, which SQLite rebuilds, is removed instead.
        ///
        /// An attach must not open the FIFO (an open of a FIFO for reading waits for a writer): it presents
        /// `io-error`.
        case fifoInPlaceOf(SQLiteFile)

        /// A file SQLite keeps for a store.
        public enum SQLiteFile: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
            /// The store file.
            case store
            /// The write-ahead log (`<store>-wal`).
            case writeAheadLog
            /// The log's shared-memory index (`<store>-shm`).
            case sharedMemory

            /// The file as Swift, such as `.writeAheadLog`.
            public var description: String { "." + rawValue }

            /// The file's path among the store's files.
            func path(in files: StoreFiles) -> String {
                switch self {
                case .store: files.database
                case .writeAheadLog: files.writeAheadLog
                case .sharedMemory: files.sharedMemory
                }
            }

            /// The file as a failure message names it.
            var name: String {
                switch self {
                case .store: "store file"
                case .writeAheadLog: "write-ahead log"
                case .sharedMemory: "shared-memory file"
                }
            }
        }

        /// The damage as Swift, such as `.truncateStore(length: 12)`.
        public var description: String {
            switch self {
            case .truncateStore(let length): ".truncateStore(length: \(length))"
            case .flipKeyFileByte(let offset): ".flipKeyFileByte(offset: \(offset))"
            case .linkInPlaceOf(let file): ".linkInPlaceOf(\(file))"
            case .fifoInPlaceOf(let file): ".fifoInPlaceOf(\(file))"
            }
        }

        /// The code of the error an attach that meets this damage presents.
        var expectedCode: StoreError.Code {
            switch self {
            case .truncateStore: .storeDamaged
            case .flipKeyFileByte: .keyFileDamaged
            case .linkInPlaceOf, .fifoInPlaceOf: .ioError
            }
        }

        /// The file it damages, among the store's files.
        func path(in files: StoreFiles) -> String {
            switch self {
            case .truncateStore: files.database
            case .flipKeyFileByte: files.key
            case .linkInPlaceOf(let file), .fifoInPlaceOf(let file): file.path(in: files)
            }
        }

        /// What it damages, as a failure message names it.
        var fileName: String {
            switch self {
            case .truncateStore: "store file"
            case .flipKeyFileByte: "key file"
            case .linkInPlaceOf(let file): "\(file.name) (a symbolic link in its place)"
            case .fifoInPlaceOf(let file): "\(file.name) (a FIFO in its place)"
            }
        }

        /// Whether the file a link or FIFO replaces is moved aside and back (all but the shared-memory index,
        /// which SQLite rebuilds: it is removed).
        var keepsOriginalAside: Bool {
            switch self {
            case .linkInPlaceOf(.sharedMemory), .fifoInPlaceOf(.sharedMemory): false
            default: true
            }
        }

        /// The kind of entry it puts in the file's place, or `nil` when it changes the file's bytes.
        var replacement: FileReplacement? {
            switch self {
            case .truncateStore, .flipKeyFileByte: nil
            case .linkInPlaceOf: .symbolicLink
            case .fifoInPlaceOf: .fifo
            }
        }

        /// The bytes it leaves of `bytes` (never empty input), for a damage that changes a file's bytes.
        func apply(to bytes: [UInt8]) -> [UInt8] {
            switch self {
            case .truncateStore(let length):
                return Array(bytes.prefix(min(max(0, length), bytes.count - 1)))
            case .flipKeyFileByte(let offset):
                var damaged = bytes
                let index = min(max(0, offset), bytes.count - 1)
                damaged[index] = ~damaged[index]
                return damaged
            case .linkInPlaceOf, .fifoInPlaceOf:
                return bytes
            }
        }
    }

    /// Whether a planned ``ioError(_:after:)`` applies to this step.
    ///
    /// It applies to the steps that write through the app or the device and leave the device running.
    var runsUnderIOError: Bool {
        switch self {
        case .launch, .unlock, .wait, .passGracePeriod, .action: true
        case .lock, .crash, .crashInsideMerge, .reboot, .powerCut, .ioError, .damage, .restoreDamage: false
        }
    }

    /// The step as Swift, such as `.lock` or `.action("share a note")`.
    public var description: String {
        switch self {
        case .launch: ".launch"
        case .lock: ".lock"
        case .unlock: ".unlock"
        case .wait(let seconds): ".wait(seconds: \(seconds))"
        case .passGracePeriod: ".passGracePeriod"
        case .crash: ".crash"
        case .crashInsideMerge: ".crashInsideMerge"
        case .reboot: ".reboot"
        case .powerCut(let mode, let seed): ".powerCut(.\(mode.rawValue), seed: \(seed))"
        case .action(let name): ".action(\(String(reflecting: name)))"
        case .ioError(let kind, let after): ".ioError(.\(kind.rawValue), after: \(after))"
        case .damage(let damage): ".damage(\(damage))"
        case .restoreDamage: ".restoreDamage"
        }
    }
}

/// A failed app simulation.
///
/// It holds the check that failed, what it said, the fewest steps that still fail it, and the seed that replays the
/// whole run.
public struct AppSimulationFailure: Error, Sendable, CustomStringConvertible {
    /// The seed of the run (`nil` for a ``AppSimulation/replay(_:)``).
    public let seed: UInt64?
    /// How many steps the run drew.
    public let stepCount: Int
    /// The index of the step after which the check failed, in the run.
    public let failedStep: Int
    /// The check's name, an app invariant's or the library's.
    ///
    /// The library's checks are `acknowledged writes present`, `queued operations ran once, in order`,
    /// `store attaches`, `damage reported, never repaired by replacement` and `step completes`.
    public let check: String
    /// What the check found.
    public let message: String
    /// The shrunk steps, the last one the one the check failed after.
    public let steps: [AppSimulationStep]

    /// The failure told as a story.
    ///
    /// It gives the check, the steps one a line, and how to replay the run.
    public var description: String {
        var lines = ["app simulation failed: \(check): \(message)"]
        lines.append("after these \(steps.count) steps (pin them with `simulation.replay([...])`):")
        lines += steps.enumerated().map { "  \($0.element),  // \($0.offset + 1)" }
        if let seed {
            lines.append("replay the whole run: `simulation.run(seed: \(seed), steps: \(stepCount))` (it failed at step \(failedStep + 1))")
        }
        return lines.joined(separator: "\n")
    }
}

/// What an app's actions and invariants see.
///
/// They see the environment, the running app's controller, and the writes and operations the simulation tracks.
@MainActor
public final class AppSimulationContext {
    /// The device, clock and state directory.
    public let environment: ProtectedStoreTestEnvironment
    /// A folder for the app's own files, beside the state directory.
    ///
    /// The disk model does not cover it, so a power cut leaves its files as they were, as if every write to them were
    /// synced.
    public let appDirectory: String
    /// The disk model over the state directory (the environment's).
    ///
    /// It records what was synced, for power cuts (and a sync is recorded, not performed, so a simulation does not
    /// wait for the disk). Files the library does not write are not modelled: a power cut removes them, so the app's
    /// own go in ``appDirectory``.
    private let disk: SimulatedDisk
    /// A number that grows by one with every action, for names and keys that must differ.
    public private(set) var number = 0
    private let simulation: AppSimulation
    /// The running app's controller, or `nil` while the app is not running.
    private var running: DataController?
    /// The names of the tracked operations submitted to the running app, in order, and the ones that ran.
    private var submitted: [String] = []
    private var ran: [String] = []
    /// The values acknowledged for each key by ``put(_:_:)`` and ``appendToInbox(_:)``.
    private var acknowledged: [String: Set<String>] = [:]
    /// The values of writes that failed under an I/O error, for each key: the store may hold them or not.
    private var uncertain: [String: Set<String>] = [:]
    /// The I/O error an ``AppSimulationStep/ioError(_:after:)`` planned for the next step.
    private var plannedIOError: (kind: AppSimulationStep.IOError, after: Int)?
    /// Whether the planned I/O error failed a call in the step that just ran.
    private var ioErrorFired = false
    /// The app whose store an I/O error kept from attaching: it presents the error until its next launch.
    private var faultedApp: ObjectIdentifier?
    /// The inbox puts the running app has not merged at once, by key: since when, and which app runs (its poll
    /// merges them). They are another process's appends, and every inbox put after an I/O error that may have
    /// failed a merge.
    private var waitingForPoll: [String: (since: ManualClock.Instant, app: ObjectIdentifier?)] = [:]
    /// The keys acknowledged through the inbox.
    private var inboxKeys: Set<String> = []
    /// The file a ``AppSimulationStep/damage(_:)`` damaged and not restored yet.
    private var damaged: DamagedFile?

    /// A failed library check.
    struct CheckFailed: Error {
        var check: String
        var message: String
    }

    init(simulation: AppSimulation) throws {
        self.simulation = simulation
        let environment = try ProtectedStoreTestEnvironment(gracePeriod: simulation.gracePeriod, simulatingDisk: true)
        self.environment = environment
        appDirectory = environment.stateDirectory + "-app"
        try FileManager.default.createDirectory(atPath: appDirectory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        disk = environment.disk!
    }

    /// The running app's controller (an action runs only while the app runs).
    public var controller: DataController {
        guard let running else { preconditionFailure("the app is not running") }
        return running
    }

    /// The attached store's coordinator.
    ///
    /// An invariant runs only while the store is ready; an action that asks for it while the store is not fails its
    /// step, saying so.
    public var coordinator: StoreCoordinator {
        get throws {
            guard let coordinator = running?.coordinator else {
                throw CheckFailed(check: "step completes", message: "the coordinator was asked for while the store is not ready")
            }
            return coordinator
        }
    }

    /// Submits a UI operation the simulation tracks.
    ///
    /// The operation must run once, in submission order, by the time the store is ready.
    ///
    /// - Parameters:
    ///   - name: the operation's name.
    ///   - body: the operation.
    /// - Throws: what ``/ProtectedStore/DataController/submit(_:deadline:_:)`` throws.
    public func submit(_ name: String, _ body: @escaping StoreOperation) throws {
        let label = "\(name) #\(submitted.count + 1)"
        try controller.submit(name) { [weak self] coordinator in
            self?.ran.append(label)
            try await body(coordinator)
        }
        submitted.append(label)
    }

    /// Writes `value` for `key` through a tracked UI operation.
    ///
    /// Once it ran, the value is acknowledged, and the simulation checks it is in the store whenever the store is
    /// ready (or a later acknowledged value).
    ///
    /// - Parameters:
    ///   - key: the key.
    ///   - value: the value.
    /// - Throws: what ``/ProtectedStore/DataController/submit(_:deadline:_:)`` throws.
    public func put(_ key: String, _ value: String) throws {
        try submit("put \(key)") { [weak self] coordinator in
            do {
                try await coordinator.put(key, value)
            } catch {
                // Under an I/O error the write may have reached the disk or not.
                self?.uncertain[key, default: []].insert(value)
                throw error
            }
            self?.acknowledged[key, default: []].insert(value)
        }
    }

    /// Appends a key-value change to the store's locked inbox, as an extension does.
    ///
    /// Once appended, a put is acknowledged.
    ///
    /// - Parameter change: the change.
    /// - Throws: what ``/ProtectedStore/DataController/appendToInbox(_:)-(InboxEntry.Change)`` throws.
    public func appendToInbox(_ change: InboxEntry.Change) throws {
        do {
            _ = try controller.appendToInbox(change)
        } catch {
            // Under an I/O error the record may be in the inbox or not.
            if case .put(let key, let value) = change { uncertain[key, default: []].insert(value) }
            throw error
        }
        if case .put(let key, let value) = change {
            acknowledged[key, default: []].insert(value)
            inboxKeys.insert(key)
        }
    }

    /// Appends a key-value change to the store's locked inbox from another process, as an extension does while
    /// the app may run.
    ///
    /// The append goes through the store's files, not the running app's controller, so the app does not merge it
    /// at once: its inbox poll does, within one poll interval, or its next attach. Once appended, a put is
    /// acknowledged, and the simulation checks it is in the ready store from then on (a put the app's poll has not
    /// had time to merge may still wait).
    ///
    /// - Parameter change: the change.
    /// - Throws: what ``/ProtectedStore/LockedInbox/append(_:)-(InboxEntry.Change)`` throws.
    public func appendToInboxFromAnotherProcess(_ change: InboxEntry.Change) throws {
        do {
            _ = try LockedInbox(configuration: store()).append(change)
        } catch {
            if case .put(let key, let value) = change { uncertain[key, default: []].insert(value) }
            throw error
        }
        if case .put(let key, let value) = change {
            acknowledged[key, default: []].insert(value)
            inboxKeys.insert(key)
            waitingForPoll[key] = (environment.clock.now, running.map(ObjectIdentifier.init))
        }
    }

    /// Appends one of the app's own changes to the store's locked inbox from another process, as an extension
    /// does while the app may run.
    ///
    /// The running app merges it at its next poll or attach, as
    /// ``appendToInboxFromAnotherProcess(_:)-(InboxEntry.Change)`` says; the app's invariants check what its
    /// handlers made of it.
    ///
    /// - Parameter change: the change.
    /// - Throws: what ``/ProtectedStore/LockedInbox/append(_:)-(Change)`` throws.
    public func appendToInboxFromAnotherProcess<Change: InboxChange>(_ change: Change) throws {
        _ = try LockedInbox(configuration: store()).append(change)
    }

    /// The app's store configuration, on the simulated disk.
    private func store() -> StoreConfiguration {
        var store = simulation.store(self)
        store.fileSystem = environment.fileSystem
        return store
    }

    /// Whether the put of `key` another process appended may still wait for the running app's poll.
    private func mayWaitForPoll(_ key: String, controller: DataController) -> Bool {
        guard let waiting = waitingForPoll[key], waiting.app == ObjectIdentifier(controller) else { return false }
        guard let interval = controller.configuration.inboxPollInterval else { return true }
        return environment.clock.now < waiting.since.advanced(by: interval)
    }

    // MARK: Steps

    func perform(_ step: AppSimulationStep, actions: [AppSimulation.Action]) async throws {
        ioErrorFired = false
        if case .ioError(let kind, let after) = step {
            plannedIOError = (kind, after)
            return
        }
        guard let planned = plannedIOError else { return try await run(step, actions: actions) }
        plannedIOError = nil
        guard step.runsUnderIOError else { return try await run(step, actions: actions) }
        let kind = DiskFaultSweep.Kind(planned.kind.fault, planned.kind.persistence)
        let plan = try environment.fileSystem.armFaultPlan(
            under: environment.stateDirectory, failingCall: planned.after + 1, fault: kind.fault,
            persistence: kind.persistence, calls: kind.calls)
        defer {
            plan.disarm()
            ioErrorFired = plan.fired
            if plan.fired, let running {
                if case .failed = running.phase { faultedApp = ObjectIdentifier(running) }
                // A merge (after an append, at an attach, at a poll) may be what failed: the records wait for the
                // app's next poll.
                for key in inboxKeys { waitingForPoll[key] = (environment.clock.now, ObjectIdentifier(running)) }
            }
        }
        try await run(step, actions: actions)
    }

    /// Whether `error`, thrown by the step that just ran, is the planned I/O error's doing.
    ///
    /// It is when the fault failed a call in the step and the error says why: a typed error, which
    /// `StoreError(wrapping:)` gives a code of its own (not the catch-all `store-error`).
    func faultExplains(_ error: any Error) -> Bool {
        guard ioErrorFired, !(error is CheckFailed) else { return false }
        return StoreError(wrapping: error).code != .storeError
    }

    private func run(_ step: AppSimulationStep, actions: [AppSimulation.Action]) async throws {
        let device = environment.device
        switch step {
        case .launch: await launchIfNeeded()
        case .lock: if device.lockState == .unlocked { await environment.lock() }
        case .unlock: if device.lockState != .unlocked { try await environment.unlock() }
        case .wait(let seconds): await environment.advance(by: .seconds(seconds))
        case .passGracePeriod: await environment.advance(by: simulation.gracePeriod + .seconds(1))
        case .crash: await crash()
        case .crashInsideMerge:
            await crash()
            var dying = store()
            dying.faultPlan = FaultPoint.Plan(.inboxMergeApplied)
            running = await environment.launch(launchOptions, store: dying)
            await crash()
        case .reboot:
            await crash()
            try await environment.reboot()
        case .powerCut(let mode, let seed):
            await crash()
            try await environment.powerOff { [disk] in
                var random = SplitMix64(seed: seed)
                try disk.powerCut(mode.diskMode, random: &random)
            }
        case .action(let name):
            guard let action = actions.first(where: { $0.name == name }) else {
                throw CheckFailed(check: "step completes", message: "no action named \"\(name)\"")
            }
            await launchIfNeeded()
            number += 1
            try await action.body(self)
            await environment.settle()
        case .ioError:
            break
        case .damage(let damage):
            await crash()
            guard damaged == nil else { return }
            damaged = try DamagedFile.damage(
                damage, at: damage.path(in: StoreFiles(database: simulation.store(self).path)), in: environment.fileSystem)
        case .restoreDamage:
            await crash()
            guard let damaged else { return }
            try damaged.restore()
            self.damaged = nil
        }
    }

    private var launchOptions: LaunchOptions {
        environment.device.lockState == .unlocked ? LaunchOptions() : LaunchOptions(reason: .location)
    }

    private func launchIfNeeded() async {
        guard running == nil else { return }
        submitted = []
        ran = []
        running = await environment.launch(launchOptions, store: store())
    }

    /// The app's process dies.
    ///
    /// Its files are dead from now on (closing its store writes nothing), and what it held is freed.
    private func crash() async {
        guard let controller = running else { return }
        running = nil
        faultedApp = nil
        waitingForPoll = [:]
        environment.crash(controller)
        disk.killOpenHandles()
        await controller.releaseAbandonedStore()
    }

    // MARK: Checks

    /// The library's checks, then the app's invariants while the store is ready.
    func check(invariants: [AppSimulation.Invariant]) async -> CheckFailed? {
        if let damaged {
            if let failure = checkDamage(damaged) { return failure }
        }
        guard let controller = running else { return nil }
        if damaged != nil { return nil }
        if case .failed(let error) = controller.phase {
            // An I/O error that kept the store from attaching is presented; the app's next launch must attach.
            if faultedApp == ObjectIdentifier(controller) {
                guard controller.presentedError?.code == error.code else {
                    return CheckFailed(
                        check: "store attaches",
                        message: "an I/O error kept the store from attaching (\(error)), and the app presented "
                            + (controller.presentedError.map { "\($0)" } ?? "nothing"))
                }
                return nil
            }
            return CheckFailed(check: "store attaches", message: "the store failed: \(error)")
        }
        var index = 0
        for name in ran {
            guard let found = submitted[index...].firstIndex(of: name) else {
                return CheckFailed(check: "queued operations ran once, in order", message: "\(name) ran out of order or twice: ran \(ran), submitted \(submitted)")
            }
            index = found + 1
        }
        guard controller.phase == .ready, let coordinator = controller.coordinator else { return nil }
        if ran != submitted && controller.queuedOperationCount == 0 {
            return CheckFailed(check: "queued operations ran once, in order", message: "ran \(ran), submitted \(submitted)")
        }
        do {
            for (key, values) in acknowledged.sorted(by: { $0.key < $1.key }) {
                let stored = try await coordinator.value(forKey: key)
                let mayHold = values.union(uncertain[key] ?? [])
                if stored.map({ !mayHold.contains($0) }) ?? true, !mayWaitForPoll(key, controller: controller) {
                    return CheckFailed(
                        check: "acknowledged writes present",
                        message: "\"\(key)\" is \(stored.map { "\"\($0)\"" } ?? "missing"); acknowledged: \(values.sorted())")
                }
            }
            for invariant in invariants {
                if let message = try await invariant.check(self) { return CheckFailed(check: invariant.name, message: message) }
            }
        } catch {
            return CheckFailed(check: "invariants read the store", message: "\(error)")
        }
        return nil
    }

    /// The damage check: while a file is damaged its bytes stay as the damage left them, and the store does not
    /// attach; an attach that meets the damage fails and presents it.
    private func checkDamage(_ damaged: DamagedFile) -> CheckFailed? {
        let check = "damage reported, never repaired by replacement"
        let file = damaged.damage.fileName
        if let change = damaged.changeSinceDamage {
            return CheckFailed(check: check, message: "the damaged \(file) (\(damaged.path)) \(change)")
        }
        guard let controller = running else { return nil }
        if controller.phase == .ready || controller.coordinator != nil {
            return CheckFailed(check: check, message: "the store attached with its \(file) damaged")
        }
        guard case .failed(let error) = controller.phase else { return nil }
        // An I/O error may have stopped the attach before it met the damage.
        if faultedApp == ObjectIdentifier(controller) { return nil }
        let expected = damaged.damage.expectedCode
        if error.code != expected || controller.presentedError?.code != expected {
            return CheckFailed(
                check: check,
                message: "the store's \(file) is damaged: the attach failed with \(error.code), the app presented "
                    + "\(controller.presentedError.map { "\($0.code)" } ?? "nothing"), expected \(expected)")
        }
        return nil
    }

    /// Ends a run that passed.
    ///
    /// The app terminates and its store closes.
    func finish() async {
        if let running { await running.terminate() }
        running = nil
        disk.stopModelling()
        try? FileManager.default.removeItem(atPath: appDirectory)
    }

    /// Ends a run that failed.
    ///
    /// A running app is killed and its store released.
    func end() async {
        await crash()
        disk.stopModelling()
        try? FileManager.default.removeItem(atPath: appDirectory)
    }
}
