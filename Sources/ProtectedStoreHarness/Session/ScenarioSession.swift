package import DiskModel
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import ProtectedData
@_spi(Testing) public import ProtectedStore
public import SecureKeys

/// An `expect` that did not hold: what the line wanted and what was there.
public struct ExpectationFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// What the `expect` line wanted.
    public let expected: String
    /// What was there.
    public let got: String
    /// `expected …, got …`.
    public var description: String { "expected \(expected), got \(got)" }
}

/// Runs the command language against a real device and a real store (SQLCipher files, libsodium keys) in one
/// state directory, with a manual clock: what the shell, scenario scripts and the simulator drive.
///
/// After every command, the work the app started runs until it is idle, so the next line sees its effect.
@MainActor
public final class ScenarioSession {
    /// The state directory: the device and the store.
    public let stateDirectory: String
    /// Where the session's device keeps its key.
    public let keyStore: any DeviceKeyStore
    /// The virtual clock, at 0 when the session starts.
    public let clock = ManualClock()
    /// Argon2id cost for devices this session sets up.
    public let kdf: PasscodeKDF
    /// Where the session writes what commands print (values read, errors, status).
    public var output: (String) -> Void

    /// The device, once set up or booted in this process; `nil` while a device agent owns it (see ``agent``).
    public private(set) var device: SimulatedDevice?
    /// The device agent's client when a `protected-store device serve` owns the state directory: the device's
    /// commands go to it, and the app asks it for the store's key.
    public private(set) var agent: DeviceAgentClient?
    /// The state directory's lock, held for the session's life when no agent serves the directory: every
    /// device this session sets up or boots uses it.
    private let ownership: StateDirectoryLock?
    /// The running app's controller, if an app runs.
    public private(set) var controller: DataController?
    /// Names of `ui` operations that ran, in the order they ran, across launches.
    public private(set) var ran: [String] = []
    /// The error of the last command that failed, `nil` after a command that succeeded.
    public private(set) var lastError: StoreError?

    /// What the store acknowledged, in the order it happened: the oracle's input.
    public enum JournalEntry: Sendable, Hashable {
        /// A UI-facing put or delete completed.
        case applied(InboxEntry.Change)
        /// A merge handled the oldest pending inbox records: applied `merged` of them and moved `quarantined`
        /// (records of a kind the app cannot apply) to the store's quarantine.
        case inboxMerged(Int, quarantined: Int)
        /// `inbox retry` applied `merged` quarantined records; `stillQuarantined` stay.
        case quarantineRetried(merged: Int, stillQuarantined: Int)
        /// `inbox discard` removed `removed` quarantined records (`which`: the id asked for, `nil` for all).
        case quarantineDiscarded(which: String?, removed: Int)
        /// A UI-facing `get` read `value` (`nil`: missing) for `key`.
        case read(key: String, value: String?)
        /// A `ui` operation ran; whether the store was ready (with a coordinator) when it did.
        case ran(String, storeWasReady: Bool)
    }

    /// Everything acknowledged so far, in order.
    public private(set) var journal: [JournalEntry] = []
    /// Every value written (puts and inbox puts): what must never be found in a file in the clear.
    public private(set) var writtenValues: Set<String> = []
    /// Whether ``writtenValues`` is kept. The simulator, which searches the files for its seed's value prefixes
    /// instead, turns it off: a long seed writes a new value every few steps.
    package var recordsWrittenValues = true
    /// Journal entries dropped by ``forgetJournal(first:)`` once checked: with ``journal``'s count, how many
    /// entries the session ever journaled.
    package private(set) var forgottenJournalEntries = 0
    /// How many entries the session ever journaled (those forgotten included): it moves whenever the store
    /// acknowledged something.
    package var journaledCount: Int { forgottenJournalEntries + journal.count }

    /// Drops the oldest `count` journal entries, already absorbed and checked, so that a long simulated seed
    /// keeps only what a later check still needs.
    package func forgetJournal(first count: Int) {
        journal.removeFirst(count)
        forgottenJournalEntries += count
    }

    /// Drops the oldest `count` names of ``ran``, already checked against the submission order.
    package func forgetRan(first count: Int) {
        ran.removeFirst(count)
    }
    /// A bug to plant in every app this session launches (the simulator's self-test).
    package var plantedFault: PlantedFault? {
        didSet { disk.plantedFault = plantedFault }
    }
    /// The disk every file of the session is written through: it forgets what was not synced at a power cut.
    package let disk: SimulatedDisk
    /// What the last `device power-cut` did.
    package private(set) var lastPowerCut: SimulatedDisk.PowerCutReport?
    /// The fault `fault next-io` planned, waiting for the next command.
    package private(set) var plannedFault: ScenarioFault?
    /// The plan of the last command that ran under a `fault next-io`, disarmed: the calls it counted and failed.
    package private(set) var lastFault: DiskFaultPlan?

    /// Size and modification time of each file at its last plaintext scan.
    private var scannedFiles: [String: [Int]] = [:]
    /// What the plaintext scan reads files into: kept from scan to scan, as the simulator scans after every step.
    private var scanBuffer: [UInt8] = []
    private let started: ManualClock.Instant
    /// Apps that crashed or died in a reboot, whose memory and threads are freed at the end of the command
    /// (``releaseAbandonedApps()``): never cleaned up by the app, as a killed process is not.
    private var abandoned: [DataController] = []
    private var operationError: StoreError?

    /// The store every app in this session uses.
    public var storePath: String { stateDirectory + "/app.sqlite" }
    /// Its files: key file, inbox, journal.
    public var storeFiles: StoreFiles { StoreFiles(database: storePath) }

    /// Opens a session on `stateDirectory`. A device already kept there is booted: starting again on the
    /// same directory is a reboot.
    ///
    /// - Parameters:
    ///   - stateDirectory: the state directory.
    ///   - kdf: the Argon2id cost of a device set up in the session.
    ///   - keyStore: where the session's device keeps its key (a file by default, or a TPM), at set-up and boot.
    ///   - output: where the session's lines go.
    /// - Throws: what booting the device throws (a damaged keybag, for instance).
    public init(
        stateDirectory: String, kdf: PasscodeKDF = .default, keyStore: any DeviceKeyStore = FileDeviceKeyStore(),
        output: @escaping (String) -> Void = { print($0) }
    ) throws {
        self.stateDirectory = stateDirectory
        self.keyStore = keyStore
        self.kdf = kdf
        self.output = output
        started = clock.now
        try SecureFile.createDirectory(at: stateDirectory)
        disk = SimulatedDisk(root: stateDirectory)
        (agent, ownership) = try Self.connectOrOwn(stateDirectory)
        if let ownership, SecureFile.exists(stateDirectory + "/device/state.json") {
            device = try SimulatedDevice(
                bootingFrom: stateDirectory, clock: clock, keyStore: keyStore, ownership: ownership, plantedFault: plantedFault)
        }
    }

    /// The agent that serves `directory`, or else the directory itself. Without an agent the session owns the
    /// directory from its start, whether or not a device is set up yet, so a second process is refused at once
    /// (state-in-use) rather than at its first device command. An agent that holds the directory but has not
    /// made its socket yet (it was just started) is waited for, up to 5 seconds.
    private static func connectOrOwn(_ directory: String) throws -> (DeviceAgentClient?, StateDirectoryLock?) {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            if let agent = try DeviceAgentClient.connect(toAgentOf: directory, clientName: "protected-store \(getpid())") {
                return (agent, nil)
            }
            do {
                return (nil, try StateDirectoryLock.acquire(directory))
            } catch let error as DeviceError
                where error.code == .stateInUse && StateDirectoryLock.isHeldByAgent(directory) && ContinuousClock.now < deadline
            {
                usleep(20_000)
            }
        }
    }

    deinit {
        disk.stopModelling()
    }

    /// Virtual time since the session started.
    public var now: Duration { started.duration(to: clock.now) }

    // MARK: Running commands

    /// Runs one command and waits until the app is idle.
    ///
    /// - Returns: for an `expect` that does not hold, how it failed; otherwise `nil`. A command that fails
    ///   (a wrong passcode, a full queue) is not a failure of the session: its error is printed and kept
    ///   for `expect error`.
    @discardableResult
    public func execute(_ command: ScenarioCommand) async -> ExpectationFailure? {
        // Every event the agent pushed before now (another process locked the device, say) is delivered and
        // handled before the command runs or the expectation is checked.
        if agent != nil {
            reconnectIfAgentGone()
            _ = try? agent?.status()
            await settle()
            await releaseAbandonedApps()  // the app a reconnect ended, before an `expect` returns below
        }
        if case .expect(let expectation) = command {
            return await check(expectation)
        }
        operationError = nil
        var plan: DiskFaultPlan?
        if let fault = plannedFault, !command.isFault {
            plannedFault = nil
            plan = try? fault.arm(under: stateDirectory)
        }
        do {
            try await perform(command)
            await settle()
            lastError = operationError
        } catch {
            await settle()
            let coded = StoreError(wrapping: error)
            lastError = coded
            output("error: \(coded)" + Self.clockHint(for: error))
        }
        if let plan { finish(plan) }
        await releaseAbandonedApps()
        return nil
    }

    /// Ends the session as a process that exits cleanly does: the app, if one runs, is terminated — its store
    /// closed and checkpointed, its threads ended — and what killed apps held is released. Prints nothing.
    ///
    /// Call it before the process exits: a store thread still closing while `exit` runs the libraries' exit
    /// handlers crashes the process (`StoreThreadCensus`). The session can run commands again afterwards.
    public func end() async {
        if let controller {
            await controller.terminate()
            self.controller = nil
        }
        await releaseAbandonedApps()
    }

    /// When the device agent went away (killed, stopped) and one serves the directory again, connects to it.
    ///
    /// The new agent booted the device from disk, as a phone restarts: the app this session ran on the old
    /// agent's keys is ended, as `device reboot` ends it, and the next `app launch` asks the new agent. Without
    /// an agent there, nothing changes: device commands fail with `agent-disconnected`, whose message says how
    /// to start one, and `status` says the agent is gone.
    private func reconnectIfAgentGone() {
        guard let gone = agent, !gone.isConnected else { return }
        let fresh: DeviceAgentClient
        do {
            guard let connected = try DeviceAgentClient.connect(toAgentOf: stateDirectory, clientName: "protected-store \(getpid())")
            else { return }
            fresh = connected
        } catch {
            output("error: the device agent (process \(gone.agentProcessID)) went away, and the one serving \(stateDirectory) "
                + "now cannot be reached: \(StoreError(wrapping: error))")
            return
        }
        agent = fresh
        let appRan = controller != nil
        abandonApp()
        output("reconnected: the device agent (process \(gone.agentProcessID)) went away, and process \(fresh.agentProcessID) "
            + "serves \(stateDirectory) now; it booted the device from disk, as a restart does"
            + (appRan ? ", so the app was ended with it (`app launch` starts it again)" : ""))
    }

    /// Frees what the apps killed by the command held, as the kernel does for a killed process: their store
    /// keys, connections and threads. Their files were made dead when they died, so closing them writes nothing
    /// (``abandonApp()``). Kept alive instead, every crash, reboot and power cut of a long simulation left a
    /// store key, an inbox key and threads behind, until the process ran out of memory mappings.
    private func releaseAbandonedApps() async {
        let killed = abandoned
        abandoned.removeAll()
        for controller in killed { await controller.releaseAbandonedStore() }
    }

    /// Ends the fault a command ran under: says which call failed and, after a planned power cut, boots the
    /// device again as `device power-cut` does (the app died with the power).
    private func finish(_ plan: DiskFaultPlan) {
        plan.disarm()
        lastFault = plan
        if let first = plan.failures.first {
            let later = plan.failures.count - 1
            output("fault: call \(first) failed (\(plan.fault))" + (later > 0 ? ", and \(later) later calls" : ""))
        } else {
            output("fault: not reached (the command made \(plan.callsSeen) calls)")
        }
        guard plan.powerCutReport != nil || plan.powerCutError != nil else { return }
        device?.powerOff()
        abandonApp()
        device = nil
        lastPowerCut = plan.powerCutReport
        do {
            if let error = plan.powerCutError { throw error }
            if SecureFile.exists(stateDirectory + "/device/state.json") {
                device = try SimulatedDevice(
                bootingFrom: stateDirectory, clock: clock, keyStore: keyStore, ownership: ownership, plantedFault: plantedFault)
            }
        } catch {
            let coded = StoreError(wrapping: error)
            lastError = coded
            output("error: \(coded)")
        }
    }

    /// For a passcode delay, the command that ends it: the session's device counts the delay on the manual
    /// clock, which only `clock advance` moves.
    static func clockHint(for error: any Error) -> String {
        guard let device = error as? DeviceError, let wait = device.retryAfter else { return "" }
        return " (`clock advance \(wait.scriptText)`)"
    }

    private func settle() async {
        await controller?.waitUntilIdle()
    }

    private func requireDevice() throws -> SimulatedDevice {
        guard let device else { throw Self.noDevice }
        return device
    }

    /// A command's passcode as the device takes it: the command's own guarded bytes (not a copy), or none.
    private static func bytes(of passcode: ScenarioPasscode?) throws -> SecureBytes {
        if let passcode { return passcode.bytes }
        return try SecureBytes(count: 0)
    }

    private static let noDevice = DeviceError(code: .noDevice, message: "no device is set up; run `device setup --passcode P` first")

    /// What the app asks for keys and availability: the device in this process, or the agent.
    private func requireKeys() throws -> any KeyAvailabilityMonitor & StoreKeyProvider {
        if let agent {
            guard agent.lastKnownStatus.lockState != nil else { throw Self.noDevice }
            return agent
        }
        return try requireDevice()
    }

    /// The device's lock state, what is available and the failed passcode attempts, from whichever owns it.
    private var deviceFacts: (lockState: SimulatedDevice.LockState, availability: ProtectedDataAvailability, failedAttempts: Int)? {
        if let agent {
            let status = agent.lastKnownStatus
            return status.lockState.map { ($0, status.availability, status.failedPasscodeAttempts) }
        }
        return device.map { ($0.lockState, $0.availability, $0.failedPasscodeAttempts) }
    }

    /// Runs `command` through the device agent if it is a device command and an agent serves the directory:
    /// `false` when this process owns the device, or the command is not the device's.
    private func performThroughAgent(_ command: ScenarioCommand) throws -> Bool {
        guard let agent else { return false }
        switch command {
        case .deviceSetup(let passcode, let grace, let wipeAfter, let allowsEmpty):
            try agent.setUp(
                passcode: Self.bytes(of: passcode), gracePeriod: grace, wipeAfterFailures: wipeAfter,
                allowsEmptyPasscode: allowsEmpty)
        case .deviceReboot:
            try agent.reboot()
            abandonApp()
        case .faultNextIO(let fault):
            // The agent's own calls (the device's files) happen in its process, out of this plan's reach: the
            // fault still reaches this process's calls, but a power cut needs the whole disk.
            guard case .powerCut = fault.kind else { return false }
            throw StoreError(
                code: .init("needs-own-device"),
                message: "fault next-io power-cut simulates this process's disk, and a device agent owns the device: "
                    + "stop the agent, or cut the power in a session without one")
        case .devicePowerCut:
            throw StoreError(
                code: .init("needs-own-device"),
                message: "device power-cut simulates this process's disk, and a device agent owns the device: "
                    + "stop the agent, or cut the power in a session without one")
        case .deviceLock:
            try agent.lock()
        case .deviceUnlock(let passcode):
            try agent.unlock(passcode: Self.bytes(of: passcode))
        case .deviceChangePasscode(let old, let new, let allowsEmpty):
            try agent.changePasscode(
                from: Self.bytes(of: old), to: Self.bytes(of: new), allowsEmptyPasscode: allowsEmpty)
        case .clockAdvance(let duration):
            // The device's clock is the agent's; the app's timers run on this process's.
            try agent.advanceClock(by: duration)
            clock.advance(by: duration)
        default:
            return false
        }
        return true
    }

    private func requireApp() throws -> DataController {
        guard let controller else { throw StoreError(code: .init("app-not-running"), message: "no app is running; run `app launch` first") }
        return controller
    }

    private func perform(_ command: ScenarioCommand) async throws {
        if try performThroughAgent(command) { return }
        switch command {
        case .deviceSetup(let passcode, let grace, let wipeAfter, let allowsEmpty):
            // The session's own device owns the directory, so a set-up would be refused as state-in-use: say
            // what it would find instead.
            if device != nil { throw DeviceError.deviceExists(at: stateDirectory) }
            device = try SimulatedDevice.setUp(
                in: stateDirectory, passcode: Self.bytes(of: passcode),
                configuration: .init(gracePeriod: grace, attemptPolicy: .init(wipeAfterFailures: wipeAfter), kdf: kdf),
                clock: clock, keyStore: keyStore, ownership: ownership, allowsEmptyPasscode: allowsEmpty)
        case .deviceReboot:
            try requireDevice().powerOff()
            abandonApp()
            device = try SimulatedDevice(
                bootingFrom: stateDirectory, clock: clock, keyStore: keyStore, ownership: ownership, plantedFault: plantedFault)
        case .devicePowerCut(let mode, let seed):
            device?.powerOff()
            abandonApp()
            device = nil
            var random = SplitMix64(seed: seed)
            let report = try disk.powerCut(SimulatedDisk.PowerCutMode(rawValue: mode.rawValue)!, random: &random)
            lastPowerCut = report
            output(
                "power cut (\(mode.rawValue)): \(report.droppedPieces) of \(report.unsyncedPieces) unsynced sectors and "
                    + "\(report.droppedEntryChanges) of \(report.unsyncedEntryChanges) unsynced file creations, renames and removals lost")
            if SecureFile.exists(stateDirectory + "/device/state.json") {
                device = try SimulatedDevice(
                bootingFrom: stateDirectory, clock: clock, keyStore: keyStore, ownership: ownership, plantedFault: plantedFault)
            }
        case .deviceLock:
            try requireDevice().lock()
        case .deviceUnlock(let passcode):
            try requireDevice().unlock(passcode: Self.bytes(of: passcode))
        case .deviceChangePasscode(let old, let new, let allowsEmpty):
            try requireDevice().changePasscode(
                from: Self.bytes(of: old), to: Self.bytes(of: new), allowsEmptyPasscode: allowsEmpty)
        case .clockAdvance(let duration):
            try DeviceRules.checkClockAdvance(by: duration, from: now)
            clock.advance(by: duration)
        case .appLaunch(let options, let protection, let attachDelay):
            try launch(options, protection: protection, attachDelay: attachDelay)
        case .appTerminate:
            try await requireApp().terminate()
            await settle()
            controller = nil
        case .appCrash:
            _ = try requireApp()
            abandonApp()
        case .ui(let name):
            let controller = try requireApp()
            try controller.submit(name) { [weak self, weak controller] _ in
                self?.ran.append(name)
                self?.journal.append(.ran(name, storeWasReady: controller?.phase == .ready && controller?.coordinator != nil))
            }
        case .put(let key, let value):
            if recordsWrittenValues { writtenValues.insert(value) }
            try requireApp().submit("put \(key)") { [weak self] in
                try await $0.put(key, value)
                self?.journal.append(.applied(.put(key: key, value: value)))
            }
        case .get(let key):
            try requireApp().submit("get \(key)") { [weak self] coordinator in
                let value = try await coordinator.value(forKey: key)
                self?.journal.append(.read(key: key, value: value))
                // Written as a script writes it, so a newline, a trailing space or an empty value can be seen.
                self?.output(value.map { "\(quoted(key)) = \(ScenarioValue.words($0))" } ?? "\(quoted(key)) is missing")
            }
        case .delete(let key):
            try requireApp().submit("delete \(key)") { [weak self] in
                try await $0.removeValue(forKey: key)
                self?.journal.append(.applied(.delete(key: key)))
            }
        case .inboxPut(let key, let value, let kind, let otherProcess):
            _ = try requireKeys()
            if recordsWrittenValues { writtenValues.insert(value) }
            // With the app running it merges at once when the store is attached; with no app (a notification
            // extension, say), or from another process, the record waits for the next attach or the app's poll.
            let id: InboxEntry.ID
            switch (otherProcess ? nil : controller, kind) {
            case (let controller?, let kind?) where kind != "put":
                id = try controller.appendToInbox(kind: kind, key: key, value: value)
            case (let controller?, _):
                id = try controller.appendToInbox(.put(key: key, value: value))
            case (nil, let kind?) where kind != "put":
                id = try LockedInbox(files: storeFiles).append(kind: kind, key: key, value: value)
            case (nil, _):
                id = try LockedInbox(files: storeFiles).append(.put(key: key, value: value))
            }
            output("inbox: sealed record \(id) for \(key)")
        case .inboxDelete(let key):
            _ = try requireKeys()
            let id: InboxEntry.ID
            if let controller {
                id = try controller.appendToInbox(.delete(key: key))
            } else {
                id = try LockedInbox(files: storeFiles).append(.delete(key: key))
            }
            output("inbox: sealed record \(id) deleting \(key)")
        case .inboxQuarantine:
            try requireApp().submit("inbox quarantine") { [weak self] coordinator in
                let records = try await coordinator.quarantinedInboxRecords()
                self?.output("inbox: \(records.count) record\(records.count == 1 ? "" : "s") in quarantine")
                for record in records { self?.output("  \(Self.describe(record))") }
            }
        case .inboxRetry:
            try requireApp().submit("inbox retry") { [weak self] coordinator in
                let report = try await coordinator.retryQuarantinedInboxRecords()
                self?.record(report, retried: true)
            }
        case .inboxDiscard(let which):
            let ids = try which.map { [try Self.recordID($0)] }
            try requireApp().submit("inbox discard") { [weak self] coordinator in
                let removed = try await coordinator.discardQuarantinedInboxRecords(ids)
                self?.journal.append(.quarantineDiscarded(which: which, removed: removed))
                self?.output("inbox: discarded \(removed) quarantined record\(removed == 1 ? "" : "s")")
            }
        case .damage(let file, let damage):
            try self.damage(file, damage)
        case .status:
            for line in statusLines() { output(line) }
        case .faultNextIO(let fault):
            plannedFault = fault
            output("fault: the next command's call \(fault.after + 1) fails (\(fault.kind.word)\(fault.persistent ? ", and every later call" : ""))")
        case .expect:
            break
        }
    }

    /// Where a damageable file lives.
    package func path(of file: DamagedFile) -> String {
        switch file {
        case .inbox: storeFiles.inbox
        case .storeKey: storeFiles.key
        case .inboxKey: storeFiles.inboxKey
        // DeviceLayout (ProtectedData).
        case .keybag: stateDirectory + "/device/device.keybag"
        case .deviceState: stateDirectory + "/device/state.json"
        case .store: storeFiles.database
        case .storeLog: storeFiles.writeAheadLog
        case .storeSharedMemory: storeFiles.sharedMemory
        }
    }

    /// For each file damaged and not restored since: its contents before the last damage (what `damage FILE
    /// restore` puts back) and after it (what nothing may overwrite or remove while it is damaged). Key files
    /// hold only wrapped keys, never a secret in the clear.
    package private(set) var damagedFiles: [DamagedFile: (original: [UInt8], damaged: [UInt8])] = [:]

    /// The contents of the file at `path`, or `nil` when it cannot be read.
    package static func contents(of path: String) -> [UInt8]? {
        try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// For each file replaced by a link or a FIFO (`damage FILE link|fifo`) and not restored since: what is in
    /// its place (a symbolic link, or a FIFO), and whether the file existed (it was moved to `FILE.aside`).
    package private(set) var replacedFiles: [DamagedFile: (isLink: Bool, movedAside: Bool)] = [:]

    /// Where `damage FILE link|fifo` moves the file it replaces.
    package func asidePath(of file: DamagedFile) -> String { path(of: file) + ".aside" }

    /// Damages `file` in place, through the file seam, and syncs it: damage is durable, as bit rot is.
    private func damage(_ file: DamagedFile, _ damage: Damage) throws {
        let path = path(of: file)
        if damage == .restore { return try restore(file, at: path) }
        if damage == .link || damage == .fifo { return try replace(file, at: path, withLink: damage == .link) }
        guard SecureFile.exists(path) else {
            throw StoreError(code: .invalidArgument, message: "damage: there is no \(file.rawValue) file (\(path)) to damage")
        }
        let original = Self.contents(of: path)
        do {
            let handle = try DiskIO.open(path, flags: O_RDWR)
            defer { handle.close() }
            var info = stat()
            guard fstat(handle.descriptor, &info) == 0 else { throw SecureKeysError.io("cannot stat", path: path, errno: errno) }
            let size = Int(info.st_size)
            func overwrite(_ bytes: [UInt8], at offset: Int) throws {
                guard offset >= 0, offset + bytes.count <= size else {
                    throw StoreError(
                        code: .invalidArgument,
                        message: "damage \(file.rawValue): bytes \(offset)..<\(offset + bytes.count) are past its end (\(size) bytes)")
                }
                guard lseek(handle.descriptor, off_t(offset), SEEK_SET) == off_t(offset) else {
                    throw SecureKeysError.io("cannot seek in", path: path, errno: errno)
                }
                try handle.write(bytes)
            }
            switch damage {
            case .truncateTail(let count):
                try handle.truncate(to: max(0, size - count))
            case .truncate(let length):
                guard length <= size else {
                    throw StoreError(
                        code: .invalidArgument, message: "damage \(file.rawValue): cannot cut \(size) bytes to \(length)")
                }
                try handle.truncate(to: length)
            case .setByte(let offset, let value):
                try overwrite([value], at: offset)
            case .flipByte(let offset):
                guard offset < size else { return try overwrite([0], at: offset) }
                try overwrite([~(try SecureFile.readAll(from: handle.descriptor, offset: offset, count: 1, path: path)[0])], at: offset)
            case .setLength(let offset, let value):
                try overwrite(withUnsafeBytes(of: value.littleEndian) { Array($0) }, at: offset + 4)
            case .restore, .link, .fifo:
                break
            }
            try handle.sync()
        } catch {
            throw StoreError(wrapping: error)
        }
        if let original, let damaged = Self.contents(of: path) { damagedFiles[file] = (original, damaged) }
        output("damage: \(file.rawValue) \(damage.scriptText)")
    }

    /// Moves `file` aside (when it exists) and puts a symbolic link to where it went, or a FIFO, in its place,
    /// durably (the folder is synced). Only a missing file may be replaced when nothing else is damaged there.
    private func replace(_ file: DamagedFile, at path: String, withLink: Bool) throws {
        guard damagedFiles[file] == nil, replacedFiles[file] == nil else {
            throw StoreError(code: .invalidArgument, message: "damage \(file.rawValue): restore its last damage first")
        }
        let aside = asidePath(of: file)
        var info = stat()
        let existed = lstat(path, &info) == 0
        do {
            if existed { try DiskIO.rename(path, to: aside) }
            let made = withLink ? symlink(aside, path) : mkfifo(path, 0o600)
            guard made == 0 else { throw SecureKeysError.io("cannot create", path: path, errno: errno) }
            try DiskIO.syncDirectory(SecureFile.folder(containing: path))
        } catch {
            throw StoreError(wrapping: error)
        }
        replacedFiles[file] = (withLink, existed)
        output("damage: \(file.rawValue) \(withLink ? "link" : "fifo")\(existed ? " (the file moved to \(aside))" : "")")
    }

    /// Puts back the contents `file` had before its last damage, in place, and syncs them (a user restoring
    /// it from a backup).
    private func restore(_ file: DamagedFile, at path: String) throws {
        if let replaced = replacedFiles[file] {
            do {
                // The link or FIFO goes (never followed, never opened), and the file comes back from aside.
                guard unlink(path) == 0 || errno == ENOENT else { throw SecureKeysError.io("cannot remove", path: path, errno: errno) }
                if replaced.movedAside { try DiskIO.rename(asidePath(of: file), to: path) }
                try DiskIO.syncDirectory(SecureFile.folder(containing: path))
            } catch {
                throw StoreError(wrapping: error)
            }
            replacedFiles[file] = nil
            output("damage: \(file.rawValue) restored (\(replaced.movedAside ? "moved back" : "removed"))")
            return
        }
        guard let original = damagedFiles[file]?.original else {
            throw StoreError(
                code: .invalidArgument,
                message: "damage \(file.rawValue) restore: \(path) was not damaged since its last restore (nothing to put back)")
        }
        do {
            let handle = try DiskIO.open(path, flags: O_RDWR | O_CREAT)
            defer { handle.close() }
            try handle.truncate(to: 0)
            try handle.write(original)
            try handle.sync()
        } catch {
            throw StoreError(wrapping: error)
        }
        damagedFiles[file] = nil
        output("damage: \(file.rawValue) restored (\(original.count) bytes)")
    }

    private func launch(_ options: LaunchOptions, protection: ProtectionClass?, attachDelay: Duration) throws {
        let keys = try requireKeys()
        if controller != nil { throw StoreError(code: .init("app-running"), message: "the app is already running; `app terminate` or `app crash` first") }
        // A store keeps the class it was created with; its key file records it.
        var protectionClass = protection ?? .complete
        let keyPath = storeFiles.key
        if SecureFile.exists(keyPath), let recorded = try? StoreKeyFile.load(from: keyPath).protectionClass {
            if let protection, protection != recorded {
                output("note: the store was created with class \(recorded.name); --protection \(protection.name) is ignored")
            }
            protectionClass = recorded
        }
        var configuration = DataController.Configuration(store: StoreConfiguration(path: storePath, protectionClass: protectionClass))
        configuration.attachDelay = attachDelay
        configuration.plantedFault = plantedFault
        let controller = DataController(configuration: configuration, keys: keys, clock: clock)
        controller.observe { [weak self] event in
            guard let self else { return }
            switch event {
            case .errorPresented(let error):
                output("presented to the user: \(error)")
            case .inboxMerged(let report):
                record(report, retried: false)
            case .operationFinished(let ticket):
                guard case .failed(let error) = ticket.outcome else { return }
                operationError = StoreError(wrapping: error)
                output("operation \(ticket.name) failed: \(StoreError(wrapping: error))")
            case .phaseChanged:
                break
            }
        }
        self.controller = controller
        controller.launch(options)
    }

    /// Journals and prints what a merge (or a retry of the quarantine) did.
    private func record(_ report: InboxMergeReport, retried: Bool) {
        journal.append(
            retried
                ? .quarantineRetried(merged: report.merged.count, stillQuarantined: report.quarantined.count)
                : .inboxMerged(report.merged.count, quarantined: report.quarantined.count))
        var line = "inbox: merged \(report.merged.count) record\(report.merged.count == 1 ? "" : "s")"
        if !report.quarantined.isEmpty { line += ", \(report.quarantined.count) \(retried ? "still " : "")quarantined" }
        if report.alreadyApplied > 0 { line += ", \(report.alreadyApplied) already applied" }
        output(line)
        for record in report.quarantined { output("  quarantined \(Self.describe(record))") }
        for problem in report.problems { output("inbox: \(problem)") }
    }

    private static func describe(_ record: QuarantinedInboxRecord) -> String {
        "\(record.id) kind \(record.kind ?? "?") (\(record.attempts) attempt\(record.attempts == 1 ? "" : "s")): \(record.reason)"
    }

    /// A record id as the tool prints it: 32 hex digits.
    private static func recordID(_ text: String) throws -> InboxEntry.ID {
        let digits = Array(text.utf8)
        guard digits.count == 32, let bytes = Optional(stride(from: 0, to: 32, by: 2).compactMap({ UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16) })),
            bytes.count == 16
        else {
            throw StoreError(code: .invalidArgument, message: "'\(text)' is not a record id (32 hex digits, as `inbox quarantine` lists them) or 'all'")
        }
        return InboxEntry.ID(bytes: bytes)
    }

    /// The app's process dies without any clean-up: the controller and its store connection are dropped
    /// where they stand. The files it had open are dead from now on (`SimulatedDisk.killOpenHandles()`: the
    /// session's only long-lived handles are the app's connections): nothing it does later — the close that
    /// frees its memory at the end of the command — reaches the disk, as nothing of a killed process does.
    private func abandonApp() {
        guard let controller else { return }
        controller.abandon()
        disk.killOpenHandles()
        abandoned.append(controller)
        self.controller = nil
    }

    // MARK: Expectations

    private var protectionClass: ProtectionClass {
        controller?.configuration.store.protectionClass
            ?? (try? StoreKeyFile.load(from: storeFiles.key).protectionClass) ?? .complete
    }

    /// The device's state as the word `expect device` uses.
    public var deviceStateWord: String {
        if let agent, !agent.isConnected { return "agent-gone" }
        guard let facts = deviceFacts else { return "none" }
        switch facts.lockState {
        case .unlocked: return "unlocked"
        case .beforeFirstUnlock: return "before-first-unlock"
        case .lockedInGracePeriod: return "grace-period"
        case .locked: return "locked"
        case .wiped: return "wiped"
        }
    }

    private func check(_ expectation: Expectation) async -> ExpectationFailure? {
        func compare(_ expected: String, _ got: String) -> ExpectationFailure? {
            // A value of a megabyte is shown by its start and its length, not printed whole.
            func shown(_ text: String) -> String { text.utf8.count <= 200 ? text : "\(text.prefix(80))… (\(text.utf8.count) bytes)" }
            return expected == got ? nil : ExpectationFailure(expected: shown(expected), got: shown(got))
        }
        switch expectation {
        case .protectedData(let available):
            let got = deviceFacts.map { $0.availability.isAvailable(protectionClass) ? "available" : "unavailable" } ?? "no device"
            return compare("protected-data \(available ? "available" : "unavailable")", "protected-data \(got)")
        case .store(let state):
            return compare("store \(state)", "store \(controller?.phase.name ?? "not-running")")
        case .coordinator(let assigned):
            return compare("coordinator \(assigned ? "assigned" : "nil")", "coordinator \(controller?.coordinator == nil ? "nil" : "assigned")")
        case .interaction(let enabled):
            let got = controller.map { $0.isInteractionEnabled ? "enabled" : "disabled" } ?? "no app running"
            return compare("interaction \(enabled ? "enabled" : "disabled")", "interaction \(got)")
        case .queued(let count):
            return compare("queued \(count)", "queued \(controller?.queuedOperationCount ?? 0)")
        case .ran(let names):
            return compare("ran [\(names.joined(separator: " "))]", "ran [\(ran.joined(separator: " "))]")
        case .value(let key, let value):
            return compare("value \(quoted(key)) = \(ScenarioValue.words(value))", "value \(quoted(key)) \(await readValue(key))")
        case .missing(let key):
            return compare("missing \(key)", (await readValue(key)) == "missing" ? "missing \(key)" : "value \(key) \(await readValue(key))")
        case .error(let code):
            return compare("error \(code)", "error \(lastError?.code.name ?? "none")")
        case .presentedError(let code):
            return compare("presented-error \(code)", "presented-error \(controller?.presentedError?.code.name ?? "none")")
        case .device(let state):
            return compare("device \(state)", "device \(deviceStateWord)")
        case .integrityOK:
            guard let coordinator = controller?.coordinator else {
                return compare("integrity ok", "integrity unknown (store \(controller?.phase.name ?? "not-running"), no coordinator)")
            }
            let result: String
            do {
                result = try await coordinator.read { try $0.integrityCheck() }.joined(separator: "; ")
            } catch {
                result = "\(error)"
            }
            return compare("integrity ok", "integrity \(result)")
        case .noPlaintext:
            return compare("no plaintext in the state directory", plaintextFindings().first ?? "no plaintext in the state directory")
        case .inbox(let count):
            let got: String
            do {
                got = String(try LockedInbox(files: storeFiles).pendingCount())
            } catch {
                got = "unreadable (\(StoreError(wrapping: error).code.name))"
            }
            return compare("inbox \(count)", "inbox \(got)")
        case .inboxDamaged(let bytes):
            let got = (try? LockedInbox(files: storeFiles).damagedByteCount()).map(String.init) ?? "unreadable"
            return compare("inbox-damaged \(bytes)", "inbox-damaged \(got)")
        case .quarantined(let count):
            guard let coordinator = controller?.coordinator else {
                return compare("quarantined \(count)", "quarantined unknown (store \(controller?.phase.name ?? "not-running"), no coordinator)")
            }
            let got = (try? await coordinator.quarantinedInboxRecords().count).map(String.init) ?? "unreadable"
            return compare("quarantined \(count)", "quarantined \(got)")
        }
    }

    /// Files in the state directory (but the simulated secure element, `hardware/`, and the lock file) that
    /// contain a value written in this session, or SQLite's plaintext header.
    public func plaintextFindings() -> [String] {
        plaintextFindings(of: writtenValues.filter { $0.utf8.count >= 6 })
    }

    /// Files in the state directory (but `hardware/` and the lock file) that contain any of `needles`, or
    /// SQLite's header.
    ///
    /// - Parameters:
    ///   - needles: the texts to look for.
    ///   - onlyChanged: skip files whose size and modification time are what they were at the
    ///     previous call with the same needles (the simulator calls this after every step).
    public func plaintextFindings(of needles: some Collection<String>, onlyChanged: Bool = false) -> [String] {
        let patterns = needles.map { Array($0.utf8) } + [Array("SQLite format 3".utf8)]
        var findings: [String] = []
        // The lock file holds the owner's process id, which a written value of digits could contain. The shell's
        // history holds what was typed at its prompt, values included, as a shell's history does: no file of the
        // store or the device.
        for file in RegularFile.all(under: stateDirectory)
        where !file.name.hasPrefix("hardware/") && file.name != StateDirectoryLock.fileName
            && file.name != Self.shellHistoryFileName
        {
            let name = file.name
            if onlyChanged && scannedFiles[name] == file.signature { continue }
            scannedFiles[name] = file.signature
            let found = withContents(of: stateDirectory + "/" + name) { haystack in
                patterns.first { pattern in
                    Self.contains(haystack, pattern)
                }
            } ?? nil
            if let found { findings.append("plaintext '\(String(decoding: found, as: UTF8.self))' in \(name)") }
        }
        return findings
    }

    /// Calls `body` with the contents of the file at `path`, read into ``scanBuffer``; `nil` if it cannot be read.
    private func withContents<Result>(of path: String, _ body: (UnsafeRawBufferPointer) -> Result) -> Result? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var length = 0
        while true {
            if length == scanBuffer.count { scanBuffer.append(contentsOf: [UInt8](repeating: 0, count: max(1 << 16, scanBuffer.count))) }
            let count = scanBuffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + length, $0.count - length) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 { return nil }
            if count == 0 { break }
            length += count
        }
        return scanBuffer.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0.prefix(length))) }
    }

    /// Whether `needle` occurs in `haystack`: `memchr` to the next candidate first byte, `memcmp` to confirm.
    private static func contains(_ haystack: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
        guard let first = needle.first, needle.count <= haystack.count, let base = haystack.baseAddress else { return false }
        let last = haystack.count - needle.count
        var offset = 0
        while offset <= last {
            guard let hit = memchr(base + offset, Int32(first), last - offset + 1) else { return false }
            let index = base.distance(to: UnsafeRawPointer(hit))
            if memcmp(base + index, needle, needle.count) == 0 { return true }
            offset = index + 1
        }
        return false
    }

    /// `= VALUE`, `missing`, or why it cannot be read now.
    private func readValue(_ key: String) async -> String {
        guard let coordinator = controller?.coordinator else {
            return "unreadable (store \(controller?.phase.name ?? "not-running"), no coordinator)"
        }
        do {
            return try await coordinator.value(forKey: key).map { "= \(ScenarioValue.words($0))" } ?? "missing"
        } catch {
            return "unreadable (\(error))"
        }
    }

    // MARK: Status

    /// The state of everything, as `status` prints it.
    public func statusLines() -> [String] {
        var lines = ["time            \(now.spoken == "0s" ? "0s" : now.spoken)"]
        if let agent, !agent.isConnected {
            // Nothing the gone agent last said holds any more (a restarted one boots the device afresh): the
            // state is unknown, and the keys it held are nobody's.
            lines.append("device agent    process \(agent.agentProcessID), gone: start `protected-store device serve --state-dir \(stateDirectory)` and the next command reconnects")
            lines.append("device          unknown (its agent is gone)")
            lines.append("protected data  nothing (the agent that held the keys is gone)")
        } else if let agent {
            lines.append("device agent    process \(agent.agentProcessID)")
            lines.append("device clock    \(agent.lastKnownStatus.clock.spoken)")
        }
        if agent?.isConnected == false {
            // Said above.
        } else if let facts = deviceFacts {
            lines.append("device          \(facts.lockState)")
            lines.append("protected data  \(facts.availability.availableClasses.isEmpty ? "nothing" : facts.availability.description)")
            if facts.failedAttempts > 0 { lines.append("failed attempts \(facts.failedAttempts)") }
        } else {
            lines.append("device          none (run `device setup --passcode P`)")
        }
        if let controller {
            lines.append("app             running (\(controller.launchOptions.map { "\($0.reason.rawValue)\($0.inBackground ? ", background" : "")" } ?? "?"))")
            lines.append("store           \(controller.phase.name) (\(controller.configuration.store.protectionClass.name))")
            lines.append("coordinator     \(controller.coordinator == nil ? "nil" : "assigned")")
            lines.append("interaction     \(controller.isInteractionEnabled ? "enabled" : "disabled")")
            lines.append("queued          \(controller.queuedOperationCount)\(controller.queuedOperationCount > 0 ? " (\(controller.queuedOperationNames.prefix(5).joined(separator: ", ")))" : "")")
            lines.append("presented error \(controller.presentedError?.code.name ?? "none")")
            do {
                let pending = try controller.inbox.pendingCount()
                if pending > 0 { lines.append("inbox           \(pending) sealed record(s) waiting") }
            } catch {
                lines.append("inbox           unreadable: \(StoreError(wrapping: error))")
            }
            if let damaged = try? controller.inbox.damagedByteCount(), damaged > 0 {
                lines.append("inbox damaged   \(damaged) bytes moved aside to \((controller.configuration.store.files.inboxDamaged as NSString).lastPathComponent)")
            }
        } else {
            lines.append("app             not running")
        }
        return lines
    }

    /// The file of the state directory where `protected-store shell` keeps the lines typed at its prompt (never
    /// one that may hold a passcode).
    nonisolated public static let shellHistoryFileName = "shell-history"

    /// For a command whose passcodes the shell is about to ask for (`device unlock`, `device change-passcode`
    /// typed without them): when there is no device to take them, reports `no-device` as running the command
    /// would — printed, and kept for `expect error` — so that nobody types a passcode for nothing. The
    /// device agent, when one serves the directory, is asked first.
    ///
    /// - Returns: `true` when there is no device and the command was refused; `false` when there is one and
    ///   the passcodes are to be asked for.
    public func refuseWithoutDevice() async -> Bool {
        if let agent {
            _ = try? agent.status()
            await settle()
        }
        guard deviceFacts == nil else { return false }
        let coded = StoreError(wrapping: Self.noDevice)
        lastError = coded
        output("error: \(coded)")
        return true
    }

    /// A one-line summary for the shell's prompt.
    public var promptSummary: String {
        let store = controller.map { "\($0.phase.name), q\($0.queuedOperationCount)" } ?? "app not running"
        return "\(now.spoken) | \(deviceStateWord) | \(store)"
    }
}
