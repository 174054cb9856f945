import DiskModel
import Foundation
import ProtectedData
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// Lifetimes driven from many tasks in a seeded random order: launch, terminate, lock, unlock, the grace period,
/// operations cancelled and expired, observations, inbox appends, synchronous reads and writes from the main actor
/// and from other threads, calls on coordinators kept after their store
/// closed, and the last reference to a controller or a coordinator dropped from a task. Nothing crashes (the
/// suite runs under AddressSanitizer and ThreadSanitizer in `make test`), nothing hangs, every call ends with a
/// result or an error that says why, and every acknowledged write is in the store at the end.
///
/// `LIFECYCLE_STRESS_SEEDS=N` (and `LIFECYCLE_STRESS_STEPS`) run it longer: `make lifecycle-stress`;
/// `LIFECYCLE_STRESS_START=S` starts at seed S, and `LIFECYCLE_STRESS_TRACE=1` prints every step.
@MainActor
@Suite("Lifecycle stress", .timeLimit(.minutes(10)))
struct LifecycleStressTests {
    static let seeds: Int = ProcessInfo.processInfo.environment["LIFECYCLE_STRESS_SEEDS"].flatMap(Int.init) ?? 4
    static let steps: Int = ProcessInfo.processInfo.environment["LIFECYCLE_STRESS_STEPS"].flatMap(Int.init) ?? 150
    static let start: UInt64 = ProcessInfo.processInfo.environment["LIFECYCLE_STRESS_START"].flatMap(UInt64.init) ?? 0

    @Test("seeded lifecycles from many tasks: no crash, no hang, every error says why, no acknowledged write lost")
    func seededLifecycles() async throws {
        for seed in Self.start..<Self.start + UInt64(Self.seeds) {
            let run = try Run(seed: seed)
            try await run.play(steps: Self.steps)
        }
    }
}

/// One seeded run over one device with up to three store slots, each with at most one live controller.
@MainActor
private final class Run {
    let seed: UInt64
    var random: SplitMix64
    let directory = TemporaryDirectory()
    let clock = ManualClock()
    let device: KeybagDevice
    /// The live controller of each slot (a slot is one store file).
    var controllers: [Int: DataController] = [:]
    /// The work trackers of every controller made, live, terminated or dropped.
    ///
    /// A settle waits for the work of each, and not only of the live ones: a terminated controller's close or a
    /// dropped one's attach ends in the background, after the call that started it. Holding a tracker does not
    /// hold its controller, whose last reference the run drops on purpose.
    var workTrackers: [WorkTracker] = []
    /// Coordinators kept after they were handed out: calls on them after their store closed must fail cleanly.
    var keptCoordinators: [StoreCoordinator] = []
    /// Tasks in flight: each returns what went wrong, or nil.
    var inFlight: [(label: String, task: Task<String?, Never>)] = []
    /// What the current step does, to name the tasks it starts.
    var label = ""
    /// The labels of the watched tasks that have not ended.
    var pendingLabels: [Int: String] = [:]
    var nextWatch = 0
    /// Observations still consumed: cancelled at the next settle.
    var observations: [Task<String?, Never>] = []
    /// Keys whose write was acknowledged, by slot: each must be in its store at the end.
    var acknowledged: [Int: Set<String>] = [:]
    var nextKey = 0
    var isLocked = false
    /// Tasks being watched that have not ended yet.
    var pending = 0
    /// What the ended tasks said went wrong.
    var findings: [String] = []
    static let trace = ProcessInfo.processInfo.environment["LIFECYCLE_STRESS_TRACE"] != nil

    /// What a call may say when it fails in this run; anything else is a finding.
    nonisolated static let expectedCodes: Set<StoreError.Code> = [
        .terminated, .closed, .protectedDataUnavailable, .cancelled, .deadlineExceeded,
    ]

    init(seed: UInt64) throws {
        self.seed = seed
        random = SplitMix64(seed: seed &+ 0x5EED)
        device = try KeybagDevice.setUp(
            in: directory.path, passcode: try SecureBytes(utf8: "1234"), configuration: .init(kdf: .minimal), clock: clock)
    }

    func path(_ slot: Int) -> String { directory.file("app-\(slot).sqlite") }

    func makeController(_ slot: Int) -> DataController {
        let controller = DataController(
            configuration: .init(store: .init(path: path(slot), protectionClass: slot == 2 ? .completeUntilFirstUserAuthentication : .complete)),
            keys: device, clock: clock)
        workTrackers.append(controller.work)
        return controller
    }

    func play(steps: Int) async throws {
        for step in 0..<steps {
            let roll = Int.random(in: 0..<100, using: &random)
            let slot = Int.random(in: 0..<3, using: &random)
            if Self.trace { FileHandle.standardError.write("seed \(seed) step \(step): roll \(roll) slot \(slot)\n".data(using: .utf8)!) }
            label = "step \(step) (roll \(roll), slot \(slot))"
            act(roll: roll, slot: slot, step: step)
            // Now and then, let what is in flight end, and look at what it said.
            if Int.random(in: 0..<8, using: &random) == 0 { try await settle() }
        }
        try await settle()
        try await finish()
    }

    private func act(roll: Int, slot: Int, step: Int) {
        switch roll {
        case 0..<10:  // a controller for an empty slot, launched at once
            guard controllers[slot] == nil else { return }
            let controller = makeController(slot)
            controllers[slot] = controller
            controller.launch(LaunchOptions(reason: Bool.random(using: &random) ? .user : .location))
        case 10..<16:  // terminate, from a task of its own
            guard let controller = controllers.removeValue(forKey: slot) else { return }
            spawn { await controller.terminate(); return nil }
        case 16..<20:  // the last reference to a controller dropped from a task
            guard let controller = controllers.removeValue(forKey: slot) else { return }
            spawnDetached(holding: controller)
        case 20..<26:
            isLocked = true
            device.lock()
        case 26..<33:
            if isLocked, (try? device.unlock(passcode: try SecureBytes(utf8: "1234"))) != nil { isLocked = false }
        case 33..<38:  // time passes: the grace period ends, deadlines pass
            clock.advance(by: .seconds(Int64.random(in: 1...12, using: &random)))
        case 38..<52:  // a UI write through perform, sometimes cancelled while it waits
            guard let controller = controllers[slot] else { return }
            let key = "k\(nextKey)"
            nextKey += 1
            let task = spawn { [weak self] in
                do {
                    try await controller.perform("put", deadline: .seconds(20)) { try await $0.put(key, "v") }
                    self?.acknowledged[slot, default: []].insert(key)
                    return nil
                } catch {
                    return Self.unexpected(error)
                }
            }
            if Int.random(in: 0..<4, using: &random) == 0 { task.cancel() }
        case 52..<60:  // a read beside the writer, or now and then a synchronous write from the main actor
            guard let controller = controllers[slot] else { return }
            if Int.random(in: 0..<3, using: &random) == 0 {
                let key = "now\(nextKey)"
                nextKey += 1
                do {
                    try controller.writeNow { try $0.execute("INSERT OR REPLACE INTO entries(key, value) VALUES (?, 'v')", [.text(key)]) }
                    acknowledged[slot, default: []].insert(key)
                } catch {
                    if let finding = Self.unexpected(error) { inFlight.append((label, Task { finding })) }
                }
                return
            }
            spawn {
                do {
                    _ = try await controller.read { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") }
                    return nil
                } catch {
                    return Self.unexpected(error)
                }
            }
        case 60..<65:  // submit, then cancel the ticket
            guard let controller = controllers[slot] else { return }
            do {
                let ticket = try controller.submit("ui") { _ in }
                if Bool.random(using: &random) { controller.cancel(ticket) }
                spawn { _ = await ticket.result(); return nil }
            } catch {
                if let finding = Self.unexpected(error) { inFlight.append((label, Task { finding })) }
            }
        case 65..<70:  // an observation, ended after a while by cancelling its task
            guard let controller = controllers[slot] else { return }
            let values = controller.values(tracking: { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") })
            let consumer = Task<String?, Never> {
                do {
                    for try await _ in values {}
                    return nil
                } catch {
                    return Self.unexpected(error)
                }
            }
            inFlight.append((label, consumer))
            // An observation ends only when its task is cancelled (or its controller ends): now, or at the settle.
            if Bool.random(using: &random) { consumer.cancel() } else { observations.append(consumer) }
        case 70..<76:  // an inbox append (the store may be locked away)
            guard let controller = controllers[slot] else { return }
            let key = "inbox\(nextKey)"
            nextKey += 1
            do {
                _ = try controller.appendToInbox(.put(key: key, value: "v"))
                acknowledged[slot, default: []].insert(key)
            } catch let error as StoreError where error.code == .inboxUnavailable {
                // The store never attached yet: no inbox key to seal to.
            } catch {
                if let finding = Self.unexpected(error) { inFlight.append((label, Task { finding })) }
            }
        case 76..<84:  // keep the coordinator of a ready store
            guard let coordinator = controllers[slot]?.coordinator else { return }
            keptCoordinators.append(coordinator)
        case 84..<96:  // a call on a kept coordinator, from a task that holds its last reference
            guard !keptCoordinators.isEmpty else { return }
            let coordinator = keptCoordinators.remove(at: Int.random(in: 0..<keptCoordinators.count, using: &random))
            let call = Int.random(in: 0..<6, using: &random)
            inFlight.append((label, Self.call(coordinator, call)))
        default:  // a reboot-free power nap: lock without grace, so class A goes at once
            isLocked = true
            device.lockWithoutGracePeriod()
        }
    }

    /// Calls `coordinator` from a detached task that holds its last reference once this returns.
    private nonisolated static func call(_ coordinator: consuming StoreCoordinator, _ call: Int) -> Task<String?, Never> {
        Task.detached { [coordinator] in
            do {
                switch call {
                case 0: _ = await coordinator.isOpen
                case 1: try await coordinator.put("kept", "v")
                case 2: try await coordinator.write { try $0.execute("INSERT OR REPLACE INTO entries(key, value) VALUES ('kept', 'w')") }
                case 3: _ = try coordinator.readNow { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") }
                case 4: try coordinator.writeNow { try $0.execute("INSERT OR REPLACE INTO entries(key, value) VALUES ('kept', 'n')") }
                default: _ = try await coordinator.read { try $0.fetchValue(Int.self, "SELECT count(*) FROM entries") }
                }
                return nil
            } catch {
                return unexpected(error)
            }
        }
    }

    private nonisolated static func unexpected(_ error: any Error) -> String? {
        if error is CancellationError { return nil }
        if let error = error as? StoreError, expectedCodes.contains(error.code) { return nil }
        return "unexpected error: \(error)"
    }

    /// Counts `task` as pending until it ends, and keeps what it says went wrong.
    private func watch(_ task: Task<String?, Never>, label: String) {
        pending += 1
        nextWatch += 1
        let id = nextWatch
        pendingLabels[id] = label
        Task { @MainActor [weak self] in
            let finding = await task.value
            self?.pending -= 1
            self?.pendingLabels[id] = nil
            if let finding { self?.findings.append("\(label): \(finding)") }
        }
    }

    @discardableResult
    private func spawn(_ body: @escaping @MainActor () async -> String?) -> Task<String?, Never> {
        let task = Task { @MainActor in await body() }
        inFlight.append((label, task))
        return task
    }

    /// Drops the caller's reference: the detached task ends holding the last one.
    private func spawnDetached(holding controller: consuming DataController) {
        inFlight.append((label, Task.detached { [controller] in
            _ = await controller.phase
            return nil
        }))
    }

    /// Lets every task in flight end — advancing the clock so that waiting operations expire (their deadline is
    /// 20 s), then unlocking so that waiting reads run — and records what they said. A task that has not ended
    /// after all that is a hang.
    ///
    /// Each round waits until every controller's work (attaches, closes, drains) has ended, so how long a close
    /// takes (a checkpoint and its syncs, slow under a sanitizer on a busy machine) never counts as a hang. A
    /// task still pending after 40 rounds and 30 s of real time never ends.
    private func settle() async throws {
        let tasks = inFlight
        inFlight = []
        for observation in observations { observation.cancel() }
        observations = []
        var round = 0
        let started = ContinuousClock.now
        for (label, task) in tasks { watch(task, label: label) }
        while pending > 0, round < 40 || ContinuousClock.now - started < .seconds(30) {
            round += 1
            if round == 20, isLocked, (try? device.unlock(passcode: try SecureBytes(utf8: "1234"))) != nil { isLocked = false }
            clock.advance(by: .seconds(21))
            for work in workTrackers { await work.waitUntilIdle() }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(pending == 0, "seed \(seed): calls never ended, even after an unlock, \(round) rounds of 21 s of clock and 30 s: \(pendingLabels.values.sorted())")
        for finding in findings { Issue.record("seed \(seed): \(finding)") }
        findings = []
        guard pending == 0 else { throw Hang() }
        for (_, task) in tasks { _ = await task.value }
    }

    private struct Hang: Error {}

    /// Terminates every controller, unlocks, and checks that every acknowledged write is in its store.
    private func finish() async throws {
        for (_, controller) in controllers { await controller.terminate() }
        controllers = [:]
        keptCoordinators = []
        if isLocked { try device.unlock(passcode: try SecureBytes(utf8: "1234")) }
        for (slot, keys) in acknowledged {
            let controller = makeController(slot)
            controller.launch()
            let stored = try await controller.read { db in Set(try db.fetchValues(String.self, "SELECT key FROM entries")) }
            let lost = keys.subtracting(stored)
            #expect(lost.isEmpty, "seed \(seed): acknowledged writes lost in slot \(slot): \(lost.sorted())")
            await controller.terminate()
        }
    }
}
