package import DiskModel
import Foundation
import Glibc
public import ProtectedData
@_spi(Testing) public import ProtectedStore
public import SecureKeys

/// An `expect` that did not hold.
///
/// It says what the line wanted and what was there.
public struct ExpectationFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// What the `expect` line wanted.
    public let expected: String
    /// What was there.
    public let got: String
    /// `expected …, got …`.
    public var description: String { "expected \(expected), got \(got)" }
}

/// Runs the command language against a real device and a real store in one state directory, with a manual clock.
///
/// The store is made of SQLCipher files and libsodium keys. This is what the shell, scenario scripts and the simulator
/// drive.
///
/// After every command, the work the app started runs until it is idle, so the next line sees its effect.
@MainActor
public final class ScenarioSession {
    /// The state directory.
    ///
    /// It holds the device and the store.
    public let stateDirectory: String
    /// Where the session's device keeps its key.
    public let keyStore: any DeviceKeyStore
    /// The virtual clock, at 0 when the session starts.
    public let clock = ManualClock()
    /// Argon2id cost for devices this session sets up.
    public let kdf: PasscodeKDF
    /// Where the session writes what commands print (values read, errors, status).
    public var output: (String) -> Void

    /// The device, once set up or booted in this process.
    ///
    /// It is `nil` while a device agent owns it (see ``agent``).
    public var device: KeybagDevice? { (backend as? InProcessDevice)?.device }
    /// The device agent's client when a `protected-store device serve` owns the state directory.
    ///
    /// The device's commands go to it, and the app asks it for the store's key.
    public var agent: DeviceAgentClient? { (backend as? AgentDevice)?.client }
    /// Where the device's commands go.
    ///
    /// This is the device in this process, which holds the state directory's lock for the session's life, or the agent
    /// that serves the directory.
    private var backend: any DeviceBackend
    /// The running app's controller, if an app runs.
    public private(set) var controller: DataController?
    /// Names of `ui` operations that ran, in the order they ran, across launches.
    public private(set) var ran: [String] = []
    /// The error of the last command that failed, `nil` after a command that succeeded.
    public private(set) var lastError: StoreError?

    /// What the store acknowledged, in the order it happened.
    ///
    /// This is the oracle's input.
    public enum JournalEntry: Sendable, Hashable {
        /// A UI-facing put or delete completed.
        case applied(InboxEntry.Change)
        /// A merge handled the oldest pending inbox records.
        ///
        /// It applied `merged` of them and moved `quarantined` (records of a kind the app cannot apply) to the store's
        /// quarantine.
        case inboxMerged(Int, quarantined: Int)
        /// `inbox retry` applied `merged` quarantined records.
        ///
        /// `stillQuarantined` stay.
        case quarantineRetried(merged: Int, stillQuarantined: Int)
        /// `inbox discard` removed `removed` quarantined records.
        ///
        /// `which` is the id asked for, or `nil` for all.
        case quarantineDiscarded(which: String?, removed: Int)
        /// A UI-facing `get` read `value` for `key`.
        ///
        /// A `nil` value means missing.
        case read(key: String, value: String?)
        /// A `ui` operation ran.
        ///
        /// It records whether the store was ready (with a coordinator) when it did.
        case ran(String, storeWasReady: Bool)
    }

    /// Everything acknowledged so far, in order.
    public private(set) var journal: [JournalEntry] = []
    /// Every value written, by puts and inbox puts.
    ///
    /// None of these may ever be found in a file in the clear.
    public private(set) var writtenValues: Set<String> = []
    /// Whether ``writtenValues`` is kept.
    ///
    /// The simulator, which searches the files for its seed's value prefixes instead, turns it off, as a long seed
    /// writes a new value every few steps.
    package var recordsWrittenValues = true
    /// The contents of each file damaged and not restored since.
    ///
    /// For each, the contents before the last damage (what `damage FILE restore` puts back) and after it (what nothing
    /// may overwrite or remove while it is damaged). Key files hold only wrapped keys, never a secret in the clear.
    package internal(set) var damagedFiles: [DamagedFile: (original: [UInt8], damaged: [UInt8])] = [:]
    /// Each file replaced by a link or a FIFO (`damage FILE link|fifo`) and not restored since.
    ///
    /// For each, what is in its place (a symbolic link, or a FIFO), and whether the file existed (it was moved to
    /// `FILE.aside`).
    package internal(set) var replacedFiles: [DamagedFile: (isLink: Bool, movedAside: Bool)] = [:]
    /// Journal entries dropped by ``forgetJournal(first:)`` once checked.
    ///
    /// With ``journal``'s count, they give how many entries the session ever journaled.
    package private(set) var forgottenJournalEntries = 0
    /// How many entries the session ever journaled, those forgotten included.
    ///
    /// It moves whenever the store acknowledged something.
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
        didSet {
            (backend as? InProcessDevice)?.plantedFault = plantedFault
            disk.plantedFault = plantedFault
        }
    }
    /// The disk every file of the session is written through.
    ///
    /// It forgets what was not synced at a power cut.
    package let disk: SimulatedDisk
    /// The disk's file system, which the session's device, apps and inbox writes go to.
    package var fileSystem: FileSystem { .simulated(disk) }
    /// What the last `device power-cut` did.
    package private(set) var lastPowerCut: SimulatedDisk.PowerCutReport?
    /// The fault `fault next-io` planned, waiting for the next command.
    package private(set) var plannedFault: ScenarioFault?
    /// The plan of the last command that ran under a `fault next-io`, disarmed.
    ///
    /// It holds the calls it counted and failed.
    package private(set) var lastFault: DiskFaultPlan?

    /// What looks for plaintext in the state directory's files, kept from scan to scan.
    var plaintextScanner = PlaintextScanner()
    private let started: ManualClock.Instant
    /// Apps that crashed or died in a reboot, whose memory and threads are freed at the end of the command.
    ///
    /// They are freed by ``releaseAbandonedApps()``, never cleaned up by the app, as a killed process is not.
    private var abandoned: [DataController] = []
    private var operationError: StoreError?

    /// The store every app in this session uses.
    public var storePath: String { stateDirectory + "/app.sqlite" }
    /// Its files.
    ///
    /// These are the key file, inbox and journal.
    public var storeFiles: StoreFiles { StoreFiles(database: storePath) }
    /// The store's locked inbox, as another process (the app's extension) writes it, on the session's disk.
    package var inbox: LockedInbox {
        var inbox = LockedInbox(files: storeFiles)
        inbox.fileSystem = fileSystem
        return inbox
    }

    /// Opens a session on `stateDirectory`.
    ///
    /// A device already kept there is booted, so starting again on the same directory is a reboot.
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
        // Made before the disk models the folder: its entry is in the folder above, which the disk does not cover.
        try SecureFile.createDirectory(at: stateDirectory, in: .real)
        disk = SimulatedDisk(root: stateDirectory)
        switch try Self.connectOrOwn(stateDirectory) {
        case (let agent?, _):
            backend = AgentDevice(agent)
        case (nil, let ownership?):
            backend = try InProcessDevice(
                stateDirectory: stateDirectory, clock: clock, keyStore: keyStore, ownership: ownership, kdf: kdf,
                fileSystem: .simulated(disk))
        case (nil, nil):
            preconditionFailure("connectOrOwn returns an agent or the directory's lock")
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
            plan = try? fault.arm(under: stateDirectory, in: fileSystem)
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

    /// Ends the session as a process that exits cleanly does.
    ///
    /// The app, if one runs, is terminated (its store closed and checkpointed, its threads ended), and what killed apps
    /// held is released. Prints nothing.
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
        backend = AgentDevice(fresh)
        let appRan = controller != nil
        abandonApp()
        output("reconnected: the device agent (process \(gone.agentProcessID)) went away, and process \(fresh.agentProcessID) "
            + "serves \(stateDirectory) now; it booted the device from disk, as a restart does"
            + (appRan ? ", so the app was ended with it (`app launch` starts it again)" : ""))
    }

    /// Frees what the apps killed by the command held, as the kernel does for a killed process.
    ///
    /// This is their store keys, connections and threads. Their files were made dead when they died, so closing them
    /// writes nothing (``abandonApp()``). Kept alive instead, every crash, reboot and power cut of a long simulation
    /// left a store key, an inbox key and threads behind, until the process ran out of memory mappings.
    private func releaseAbandonedApps() async {
        let killed = abandoned
        abandoned.removeAll()
        for controller in killed { await controller.releaseAbandonedStore() }
    }

    /// Ends the fault a command ran under.
    ///
    /// It says which call failed and, after a planned power cut, boots the device again as `device power-cut` does (the
    /// app died with the power).
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
        do {
            try backend.cutPower(endingApp: abandonApp) {
                lastPowerCut = plan.powerCutReport
                if let error = plan.powerCutError { throw error }
            }
        } catch {
            let coded = StoreError(wrapping: error)
            lastError = coded
            output("error: \(coded)")
        }
    }

    /// For a passcode delay, the command that ends it.
    ///
    /// The session's device counts the delay on the manual clock, which only `clock advance` moves.
    static func clockHint(for error: any Error) -> String {
        guard let device = error as? DeviceError, let wait = device.retryAfter else { return "" }
        return " (`clock advance \(wait.scriptText)`)"
    }

    func settle() async {
        await controller?.waitUntilIdle()
    }

    /// A command's passcode as the device takes it.
    ///
    /// This is the command's own guarded bytes (not a copy), or none.
    private static func bytes(of passcode: ScenarioPasscode?) throws -> SecureBytes {
        if let passcode { return passcode.bytes }
        return try SecureBytes(count: 0)
    }

    /// What the app asks for keys and availability.
    ///
    /// This is the device in this process, or the agent.
    private func requireKeys() throws -> any KeyAvailabilityMonitor & StoreKeyProvider {
        try backend.keys()
    }

    /// The device's lock state, what is available and the failed passcode attempts, from whichever owns it.
    var deviceFacts: DeviceFacts? { backend.facts }

    private func requireApp() throws -> DataController {
        guard let controller else { throw StoreError(code: .init("app-not-running"), message: "no app is running; run `app launch` first") }
        return controller
    }

    private func perform(_ command: ScenarioCommand) async throws {
        switch command {
        case .deviceSetup(let passcode, let grace, let wipeAfter, let allowsEmpty):
            try backend.setUp(
                passcode: Self.bytes(of: passcode), gracePeriod: grace, wipeAfterFailures: wipeAfter,
                allowsEmptyPasscode: allowsEmpty)
        case .deviceReboot:
            try backend.reboot(endingApp: abandonApp)
        case .devicePowerCut(let mode, let seed):
            try backend.cutPower(endingApp: abandonApp) {
                var random = SplitMix64(seed: seed)
                let report = try disk.powerCut(SimulatedDisk.PowerCutMode(rawValue: mode.rawValue)!, random: &random)
                lastPowerCut = report
                output(
                    "power cut (\(mode.rawValue)): \(report.droppedPieces) of \(report.unsyncedPieces) unsynced sectors and "
                        + "\(report.droppedEntryChanges) of \(report.unsyncedEntryChanges) unsynced file creations, renames and removals lost")
            }
        case .deviceLock:
            try backend.lock()
        case .deviceUnlock(let passcode):
            try backend.unlock(passcode: Self.bytes(of: passcode))
        case .deviceChangePasscode(let old, let new, let allowsEmpty):
            try backend.changePasscode(
                from: Self.bytes(of: old), to: Self.bytes(of: new), allowsEmptyPasscode: allowsEmpty)
        case .clockAdvance(let duration):
            try backend.advanceDeviceClock(by: duration, from: now)
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
                id = try inbox.append(kind: kind, key: key, value: value)
            case (nil, _):
                id = try inbox.append(.put(key: key, value: value))
            }
            output("inbox: sealed record \(id) for \(key)")
        case .inboxDelete(let key):
            _ = try requireKeys()
            let id: InboxEntry.ID
            if let controller {
                id = try controller.appendToInbox(.delete(key: key))
            } else {
                id = try inbox.append(.delete(key: key))
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
            // A device agent's own calls (the device's files) happen in its process, out of this plan's reach:
            // the fault still reaches this process's calls, but a power cut needs the whole disk.
            if case .powerCut = fault.kind { try backend.checkOwnsDisk(for: "fault next-io power-cut") }
            plannedFault = fault
            output("fault: the next command's call \(fault.after + 1) fails (\(fault.kind.word)\(fault.persistent ? ", and every later call" : ""))")
        case .expect:
            break
        }
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
        configuration.store.fileSystem = fileSystem
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

    /// A record id as the tool prints it.
    ///
    /// It has 32 hex digits.
    private static func recordID(_ text: String) throws -> InboxEntry.ID {
        let digits = Array(text.utf8)
        guard digits.count == 32, let bytes = Optional(stride(from: 0, to: 32, by: 2).compactMap({ UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16) })),
            bytes.count == 16
        else {
            throw StoreError(code: .invalidArgument, message: "'\(text)' is not a record id (32 hex digits, as `inbox quarantine` lists them) or 'all'")
        }
        return InboxEntry.ID(bytes: bytes)
    }

    /// The app's process dies without any clean-up.
    ///
    /// The controller and its store connection are dropped where they stand. The files it had open are dead from now on
    /// (`SimulatedDisk.killOpenHandles()`); the session's only long-lived handles are the app's connections. Nothing it
    /// does later, such as the close that frees its memory at the end of the command, reaches the disk, as nothing of a
    /// killed process does.
    private func abandonApp() {
        guard let controller else { return }
        controller.abandon()
        disk.killOpenHandles()
        abandoned.append(controller)
        self.controller = nil
    }

    /// The file of the state directory where `protected-store shell` keeps the lines typed at its prompt (never
    /// one that may hold a passcode).
    nonisolated public static let shellHistoryFileName = "shell-history"

    /// Reports `no-device` before the shell asks for passcodes, when there is no device to take them.
    ///
    /// This is for a command whose passcodes the shell is about to ask for (`device unlock`, `device change-passcode`
    /// typed without them). It reports `no-device` as running the command would (printed, and kept for `expect error`),
    /// so that nobody types a passcode for nothing. The device agent, when one serves the directory, is asked first.
    ///
    /// - Returns: `true` when there is no device and the command was refused; `false` when there is one and
    ///   the passcodes are to be asked for.
    public func refuseWithoutDevice() async -> Bool {
        if let agent {
            _ = try? agent.status()
            await settle()
        }
        guard deviceFacts == nil else { return false }
        let coded = StoreError(wrapping: noScenarioDevice)
        lastError = coded
        output("error: \(coded)")
        return true
    }
}
