import Foundation
import ProtectedData
import ProtectedStore

extension ScenarioSession {
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

    /// A one-line summary for the shell's prompt.
    public var promptSummary: String {
        let store = controller.map { "\($0.phase.name), q\($0.queuedOperationCount)" } ?? "app not running"
        return "\(now.spoken) | \(deviceStateWord) | \(store)"
    }
}
