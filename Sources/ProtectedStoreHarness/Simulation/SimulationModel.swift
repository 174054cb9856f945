import ProtectedStore
import ProtectedData
import SecureKeys

/// The oracle of what the device and the store must look like after each command.
///
/// It is kept independently of the code under test, from the design's rules (README.md), not by replaying the
/// implementation.
struct SimulationModel {
    static let passcode: ScenarioPasscode = "1234"
    /// How often a running app looks for records another process appended (the controller's default, which
    /// the sessions the simulator drives keep).
    static let inboxPollInterval: Duration =
        DataController.Configuration(store: StoreConfiguration(path: "/", protectionClass: .complete)).inboxPollInterval ?? .seconds(1)
    let gracePeriod: Duration
    let policy = PasscodeAttemptPolicy()

    var passcode = SimulationModel.passcode
    var now: Duration = .zero
    var deviceSetUp = false
    var unlocked = false
    var unlockedSinceBoot = false
    var graceDeadline: Duration?
    var failures = 0
    var delayUntil: Duration?
    /// The device's "erase after N failures" setting.
    var wipeAfter: Int?
    /// Whether the device erased its keys.
    ///
    /// From then on no key of any class is ever available again, and the keybag and device key files must never exist
    /// again (invariant 9).
    var wiped = false

    var appRunning = false
    /// The class the store was created with, fixed by the first launch.
    var storeClass: ProtectionClass?
    /// Whether the store has attached once (so its inbox key exists).
    var storeAttachedOnce = false
    /// Acknowledged contents of the store.
    var contents: [String: String] = [:]

    /// An acknowledged inbox append not merged yet.
    struct PendingRecord {
        let key: String
        /// The value, or `nil` for a removal.
        let value: String?
        /// The record's kind, or `nil` for the built-in put and delete, which the app applies.
        ///
        /// Any other kind is one the app cannot apply, so the merge must move the record to the quarantine.
        let kind: String?
        /// When another process appended it.
        ///
        /// A running app merges it at its next poll, within one interval. Also set for the records waiting when a
        /// merge failed under a fault; the poll merges them.
        var otherProcessAt: Duration?
        /// Whether the append failed under an I/O fault.
        ///
        /// Such an append is not acknowledged, so the record may be in the inbox or not, and a merge may or may not
        /// handle it.
        var optional = false
    }

    /// Acknowledged inbox writes not merged yet, oldest first.
    var pendingInbox: [PendingRecord] = []
    /// The kinds of the records in the store's quarantine, oldest first.
    ///
    /// They are kept until discarded (invariant 7).
    var quarantine: [String] = []
    /// The values the store may hold for keys a write failed under an I/O fault.
    ///
    /// They are what it may hold instead of the acknowledged one (`nil` for missing), until an acknowledged write to
    /// the key settles it.
    var uncertain: [String: Set<String?>] = [:]
    /// A passcode change that failed under a fault after its new keybag reached the disk.
    ///
    /// The device keeps the old passcode until it boots, and boots with the new one if its keybag file still holds
    /// these bytes. The old passcode is kept too: a later power cut may lose the new keybag's rename, so each boot
    /// decides.
    var passcodeAtBoot: (keybag: [UInt8], new: ScenarioPasscode, old: ScenarioPasscode)?
    /// A passcode attempt a fault hit.
    ///
    /// Its counter (or the wipe it started) may not have reached the disk, so the next boot's counter and wipe are
    /// read from the device rather than predicted. This holds at every boot up to the next power cut, which alone
    /// decides whether a count written but never synced stays.
    var attemptMayBeUnrecorded = false
    /// Whether the inbox holds a span damaged since the last merge (which moves such bytes aside).
    var inboxHasDamage = false
    /// A key file or device file damaged and not restored yet (never the inbox).
    ///
    /// The step that meets it must fail with its typed error, and nothing may overwrite or remove it.
    var damaged: DamagedFile?
    /// A boot met a damaged keybag or device state.
    ///
    /// No device runs until a restore and a reboot.
    var bootFailed = false
    /// A keybag or device state was restored and the device has not booted from it yet.
    ///
    /// At that boot the failed-attempt count is compared with the model's.
    var deviceFileRestored = false
    /// `ui` operations in submission order.
    var submitted: [String] = []

    /// Something the store reported that the model contradicts (a read, a merge's counts).
    ///
    /// It is found while absorbing the journal, and the simulator reports it as a violation.
    var finding: (invariant: String, message: String, expectation: Expectation?)?

    init(gracePeriod: Duration) { self.gracePeriod = gracePeriod }

    /// Whether the keys of `protectionClass` are held.
    func keysHeld(_ protectionClass: ProtectionClass) -> Bool {
        guard deviceSetUp, !wiped else { return false }
        switch protectionClass {
        case .complete, .completeUnlessOpen: return unlocked || graceDeadline != nil
        case .completeUntilFirstUserAuthentication: return unlockedSinceBoot
        case .none: return true
        }
    }

    /// The device as `expect device` names it.
    var deviceWord: String {
        guard deviceSetUp else { return "none" }
        if wiped { return "wiped" }
        if unlocked { return "unlocked" }
        if !unlockedSinceBoot { return "before-first-unlock" }
        return graceDeadline != nil ? "grace-period" : "locked"
    }

    var delayActive: Bool { delayUntil.map { now < $0 } ?? false }

    /// Whether the next wrong passcode erases the device.
    var nextFailureWipes: Bool { wipeAfter.map { failures + 1 >= $0 } ?? false }

    /// The length of the payload an inbox append of `value` under `key` seals.
    ///
    /// The layout is in <doc:/SecureKeys/KeyFileFormats>, "Inbox records", payload version 3: version, id, sequence number, kind,
    /// schema version and body length, then the body. For the built-in put the body is the key and the value, each
    /// after its u32 length; for another kind it is the JSON `{"key":…,"value":…}` (the generator's keys and values
    /// need no escaping).
    static func inboxPayloadLength(key: String, value: String, kind: String?) -> Int {
        let kindName = kind ?? "put"
        // Payload version 3: version, id, sequence number (u64), kind length, kind, schema version, body length.
        let header = 1 + 16 + 8 + 1 + kindName.utf8.count + 4 + 4
        if kind == nil { return header + 4 + key.utf8.count + 4 + value.utf8.count }
        return header + #"{"key":"","value":""}"#.utf8.count + key.utf8.count + value.utf8.count
    }

    /// Applies a command's effect on the device and predicts the error code it must end with.
    mutating func apply(_ command: ScenarioCommand) -> String? {
        switch command {
        case .deviceSetup(let passcode, _, let wipeAfter, _):
            if deviceSetUp { return "device-exists" }
            deviceSetUp = true
            unlocked = true
            unlockedSinceBoot = true
            self.passcode = passcode ?? ""
            self.wipeAfter = wipeAfter
            return nil
        case .deviceLock:
            guard deviceSetUp else { return "no-device" }
            if unlocked {
                unlocked = false
                graceDeadline = now + gracePeriod
                expireGracePeriod()
            }
            return nil
        case .deviceUnlock(let passcode):
            guard deviceSetUp else { return "no-device" }
            if wiped { return "device-wiped" }
            if delayActive { return "passcode-delay" }
            if unlocked { return nil }
            guard passcode == self.passcode else { return recordFailure() }
            failures = 0
            delayUntil = nil
            unlocked = true
            unlockedSinceBoot = true
            graceDeadline = nil
            return nil
        case .deviceChangePasscode(let old, let new, _):
            // Allowed locked or unlocked; the lock state does not change. A wrong old passcode is a failed
            // attempt like a wrong unlock: counted, delayed, and the N-th erases the device.
            guard deviceSetUp else { return "no-device" }
            if wiped { return "device-wiped" }
            if delayActive { return "passcode-delay" }
            guard (old ?? "") == passcode else { return recordFailure() }
            passcode = new ?? ""
            passcodeAtBoot = nil
            failures = 0
            delayUntil = nil
            return nil
        case .deviceReboot:
            guard deviceSetUp else { return "no-device" }
            reboot()
            return bootError()
        case .devicePowerCut:
            // What was acknowledged survives a power cut as it survives a reboot: the same model.
            guard deviceSetUp else { return nil }
            reboot()
            return bootError()
        case .clockAdvance(let duration):
            now += duration
            expireGracePeriod()
            return nil
        case .appLaunch(_, let protection, _):
            guard deviceSetUp else { return "no-device" }
            if appRunning { return "app-running" }
            appRunning = true
            if storeClass == nil { storeClass = protection ?? .complete }
            return nil
        case .appTerminate, .appCrash:
            guard appRunning else { return "app-not-running" }
            appRunning = false
            return nil
        case .ui(let name):
            guard appRunning else { return "app-not-running" }
            submitted.append(name)
            return nil
        case .put, .get, .delete:
            return appRunning ? nil : "app-not-running"
        case .inboxPut(let key, let value, let kind, let otherProcess):
            guard deviceSetUp else { return "no-device" }
            guard storeAttachedOnce else { return "inbox-unavailable" }
            let unknownKind = kind == "put" ? nil : kind
            if Self.inboxPayloadLength(key: key, value: value, kind: unknownKind) > InboxRecord.maximumPayloadLength {
                return "inbox-record-too-large"
            }
            pendingInbox.append(PendingRecord(key: key, value: value, kind: unknownKind, otherProcessAt: otherProcess ? now : nil))
            return nil
        case .inboxDelete(let key):
            guard deviceSetUp else { return "no-device" }
            guard storeAttachedOnce else { return "inbox-unavailable" }
            pendingInbox.append(PendingRecord(key: key, value: nil, kind: nil, otherProcessAt: nil))
            return nil
        case .inboxQuarantine, .inboxRetry, .inboxDiscard:
            return appRunning ? nil : "app-not-running"
        case .damage(let file, .restore):
            guard damaged == file else { return "invalid-argument" }
            damaged = nil
            if file == .keybag || file == .deviceState { deviceFileRestored = true }
            return nil
        case .damage(.inbox, _):
            inboxHasDamage = true
            return nil
        case .damage(let file, _):
            damaged = file
            return nil
        case .status, .expect, .faultNextIO:
            return nil
        }
    }

    /// Power off and boot.
    ///
    /// Every key is gone, the app killed, a passcode delay carried over, and a count left at the erase limit erased.
    mutating func reboot() {
        if !wiped, countIsAtEraseLimit { _ = erase() }
        unlocked = false
        unlockedSinceBoot = false
        graceDeadline = nil
        appRunning = false
        let delay = policy.delay(afterFailures: failures)
        delayUntil = delay > .zero ? now + delay : nil
    }

    /// What a boot that meets ``damaged`` fails with.
    ///
    /// The device does not run until a restore and a reboot. A damaged keybag is a damaged key file, a damaged state
    /// file is damaged device state.
    private mutating func bootError() -> String? {
        let error: String? = switch damaged {
        case .keybag: "key-file-damaged"
        case .deviceState: "device-state-damaged"
        default: nil
        }
        bootFailed = error != nil
        return error
    }

    /// A wrong passcode, counted.
    ///
    /// The N-th of a device set up with `--wipe-after N` erases the device; otherwise the count sets the delay before
    /// the next attempt.
    private mutating func recordFailure() -> String {
        // Never past the erase limit: a count left there (a right passcode whose reset failed) counts as it again.
        failures = wipeAfter.map { min(failures + 1, $0) } ?? failures + 1
        if countIsAtEraseLimit { return erase() }
        let delay = policy.delay(afterFailures: failures)
        delayUntil = delay > .zero ? now + delay : nil
        return "wrong-passcode"
    }

    /// Whether the count has reached `--wipe-after`.
    ///
    /// A wrong passcode that reaches it erases the device, and a boot that finds a count left there unresolved (a
    /// right passcode whose reset to 0 failed) erases it.
    private var countIsAtEraseLimit: Bool { wipeAfter.map { failures >= $0 } ?? false }

    private mutating func erase() -> String {
        wiped = true
        unlocked = false
        unlockedSinceBoot = false
        graceDeadline = nil
        return "device-wiped"
    }

    private mutating func expireGracePeriod() {
        if let deadline = graceDeadline, now >= deadline { graceDeadline = nil }
    }

    /// The inbox records a ready store may still hold.
    ///
    /// Only those another process appended less than a poll interval ago remain. Every other record was merged at the
    /// attach or at once after its append.
    var inboxRecordsAReadyStoreMayHold: Int {
        let waiting = acknowledgedPending
        return waiting.allSatisfy { $0.otherProcessAt.map { now < $0 + Self.inboxPollInterval } ?? false } ? waiting.count : 0
    }

    /// Applies what the store acknowledged since the last step, and checks what it read and reported.
    mutating func absorb(_ journal: ArraySlice<ScenarioSession.JournalEntry>) {
        for entry in journal {
            switch entry {
            case .applied(.put(let key, let value)):
                contents[key] = value
                uncertain[key] = nil
            case .applied(.delete(let key)):
                contents[key] = nil
                uncertain[key] = nil
            case .inboxMerged(let merged, let quarantined):
                inboxHasDamage = false
                // A merge handles the oldest records, in order: those of a kind the app applies are applied,
                // the others move to the quarantine. Nothing is dropped. A record whose append failed under a
                // fault may be there or not: the first choice of present ones that gives the counts is taken.
                guard let handled = Self.handledRecords(pendingInbox, merged: merged, quarantined: quarantined) else {
                    if finding == nil {
                        let waiting = pendingInbox.filter { !$0.optional }
                        let applicable = waiting.prefix(merged + quarantined).filter { $0.kind == nil }.count
                        finding = (
                            "7 inbox records merged or quarantined",
                            "a merge applied \(merged) and quarantined \(quarantined) records; the oldest "
                                + "\(min(waiting.count, merged + quarantined)) waiting held \(applicable) the app applies and "
                                + "\(min(waiting.count, merged + quarantined) - applicable) it cannot",
                            .quarantined(quarantine.count + quarantined)
                        )
                    }
                    pendingInbox.removeFirst(min(merged + quarantined, pendingInbox.count))
                    break
                }
                for (record, present) in zip(pendingInbox, handled) {
                    if let kind = record.kind {
                        if present { quarantine.append(kind) }
                    } else if record.optional {
                        // Chosen present or absent by the counts alone, which another choice may give as well
                        // (two failed appends, one of them kept): either value may be the store's.
                        uncertain[record.key, default: []].insert(present ? contents[record.key] : record.value)
                        if present { contents[record.key] = record.value }
                    } else if present {
                        contents[record.key] = record.value
                        uncertain[record.key] = nil
                    }
                }
                // A failed append the counts left for later may have been merged now all the same (of three appends,
                // two failed: the counts took the first, the store had the third).
                for record in pendingInbox.dropFirst(handled.count) where record.optional && record.kind == nil {
                    uncertain[record.key, default: []].insert(record.value)
                }
                pendingInbox.removeFirst(handled.count)
            case .quarantineRetried(let merged, let stillQuarantined):
                // The app knows none of the quarantined kinds: a retry applies nothing and keeps them all.
                if finding == nil, merged != 0 || stillQuarantined != quarantine.count {
                    finding = (
                        "7 inbox records merged or quarantined",
                        "a retry of \(quarantine.count) quarantined records of unknown kinds applied \(merged) and kept \(stillQuarantined)",
                        .quarantined(quarantine.count)
                    )
                }
            case .quarantineDiscarded(let which, let removed):
                let expected = which == nil ? quarantine.count : min(1, quarantine.count)
                if finding == nil, removed != expected {
                    finding = (
                        "7 inbox records merged or quarantined",
                        "inbox discard \(which ?? "all") removed \(removed) of \(quarantine.count) quarantined records",
                        .quarantined(which == nil ? 0 : quarantine.count - expected)
                    )
                }
                // By id the model cannot say which record went: it keeps the count right.
                if which == nil { quarantine.removeAll() } else { quarantine.removeFirst(min(removed, quarantine.count)) }
            case .read(let key, let value):
                // A read sees every write acknowledged before it and none after: the operations run in order.
                if finding == nil, value != contents[key], !(uncertain[key]?.contains(value) ?? false) {
                    finding = (
                        "4 acknowledged writes readable",
                        "get \(key) read \(value.map(Self.shown) ?? "missing"), expected \(contents[key].map(Self.shown) ?? "missing")",
                        contents[key].map { .value(key: key, value: $0) } ?? .missing(key: key)
                    )
                }
            case .ran: break
            }
        }
    }

    /// Which of the oldest `records` a merge that applied `merged` and quarantined `quarantined` handled.
    ///
    /// For each record up to the last handled, it says whether it was there (a record whose append failed under a
    /// fault may not be). Present optional records are tried fewest first. It returns `nil` when no choice gives the
    /// counts.
    static func handledRecords(_ records: [PendingRecord], merged: Int, quarantined: Int) -> [Bool]? {
        let optional = records.indices.filter { records[$0].optional }.prefix(10)
        let choices = (0..<(1 << optional.count)).sorted { $0.nonzeroBitCount < $1.nonzeroBitCount }
        for choice in choices {
            var present: [Bool] = []
            var applied = 0
            var moved = 0
            for (index, record) in records.enumerated() {
                if applied + moved == merged + quarantined { break }
                let isPresent = optional.firstIndex(of: index).map { choice & (1 << ($0 - optional.startIndex)) != 0 } ?? !record.optional
                present.append(isPresent)
                if isPresent { if record.kind == nil { applied += 1 } else { moved += 1 } }
            }
            if applied == merged, moved == quarantined { return present }
        }
        return nil
    }

    /// The acknowledged inbox appends not merged yet (a failed append under a fault is not acknowledged).
    var acknowledgedPending: [PendingRecord] { pendingInbox.filter { !$0.optional } }

    /// A value as shown in a message.
    ///
    /// A long one is shown by its start and length.
    static func shown(_ value: String) -> String {
        value.utf8.count <= 80 ? value : "\(value.prefix(40))… (\(value.utf8.count) bytes)"
    }
}
