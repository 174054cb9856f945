import ProtectedStore
import ProtectedData

/// The oracle: what the device and the store must look like after each command, kept independently of
/// the code under test — from the rules in DESIGN.md, not by replaying the implementation.
struct SimulationModel {
    static let passcode = "1234"
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

    var appRunning = false
    /// The class the store was created with; fixed by the first launch.
    var storeClass: ProtectionClass?
    /// Whether the store has attached once (so its inbox key exists).
    var storeAttachedOnce = false
    /// Acknowledged contents of the store.
    var contents: [String: String] = [:]
    /// Acknowledged inbox writes not merged yet, oldest first.
    var pendingInbox: [(key: String, value: String?)] = []
    /// `ui` operations in submission order.
    var submitted: [String] = []

    init(gracePeriod: Duration) { self.gracePeriod = gracePeriod }

    /// Whether the keys of `protectionClass` are held.
    func keysHeld(_ protectionClass: ProtectionClass) -> Bool {
        guard deviceSetUp else { return false }
        switch protectionClass {
        case .complete, .completeUnlessOpen: return unlocked || graceDeadline != nil
        case .completeUntilFirstUserAuthentication: return unlockedSinceBoot
        case .none: return true
        }
    }

    /// The device as `expect device` names it.
    var deviceWord: String {
        guard deviceSetUp else { return "none" }
        if unlocked { return "unlocked" }
        if !unlockedSinceBoot { return "before-first-unlock" }
        return graceDeadline != nil ? "grace-period" : "locked"
    }

    private var delayActive: Bool { delayUntil.map { now < $0 } ?? false }

    /// Applies a command's effect on the device and predicts the error code it must end with.
    mutating func apply(_ command: ScenarioCommand) -> String? {
        switch command {
        case .deviceSetup:
            if deviceSetUp { return "device-exists" }
            deviceSetUp = true
            unlocked = true
            unlockedSinceBoot = true
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
            guard deviceSetUp else { return "no-device" }
            if delayActive { return "passcode-delay" }
            guard (old ?? "") == passcode else { return recordFailure() }
            passcode = new ?? ""
            failures = 0
            delayUntil = nil
            return nil
        case .deviceReboot:
            guard deviceSetUp else { return "no-device" }
            reboot()
            return nil
        case .devicePowerCut:
            // What was acknowledged survives a power cut as it survives a reboot: the same model.
            if deviceSetUp { reboot() }
            return nil
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
        case .inboxPut(let key, let value, _):
            guard deviceSetUp else { return "no-device" }
            guard storeAttachedOnce else { return "inbox-unavailable" }
            pendingInbox.append((key, value))
            return nil
        case .inboxDelete(let key):
            guard deviceSetUp else { return "no-device" }
            guard storeAttachedOnce else { return "inbox-unavailable" }
            pendingInbox.append((key, nil))
            return nil
        case .inboxQuarantine, .inboxRetry, .inboxDiscard:
            return appRunning ? nil : "app-not-running"
        case .status, .expect, .damage:
            return nil
        }
    }

    /// Power off and boot: every key gone, the app killed, a passcode delay carried over.
    private mutating func reboot() {
        unlocked = false
        unlockedSinceBoot = false
        graceDeadline = nil
        appRunning = false
        let delay = policy.delay(afterFailures: failures)
        delayUntil = delay > .zero ? now + delay : nil
    }

    private mutating func recordFailure() -> String {
        failures += 1
        let delay = policy.delay(afterFailures: failures)
        delayUntil = delay > .zero ? now + delay : nil
        return "wrong-passcode"
    }

    private mutating func expireGracePeriod() {
        if let deadline = graceDeadline, now >= deadline { graceDeadline = nil }
    }

    /// Applies what the store acknowledged since the last step.
    mutating func absorb(_ journal: ArraySlice<ScenarioSession.JournalEntry>) {
        for entry in journal {
            switch entry {
            case .applied(.put(let key, let value)): contents[key] = value
            case .applied(.delete(let key)): contents[key] = nil
            case .inboxMerged(let count):
                for (key, value) in pendingInbox.prefix(count) { contents[key] = value }
                pendingInbox.removeFirst(min(count, pendingInbox.count))
            case .ran: break
            }
        }
    }
}
