import Foundation
import SecureKeys

/// Where a simulated device keeps its files inside a state directory.
///
/// `hardware/` stands for the phone's secure element: it holds the device key (the stand-in for the
/// hardware UID key), the one secret the simulation must keep unwrapped. Everything else is wrapped.
struct DeviceLayout: Sendable {
    let root: String
    var deviceDirectory: String { root + "/device" }
    var hardwareDirectory: String { root + "/hardware" }
    var keybagPath: String { deviceDirectory + "/device.keybag" }
    var statePath: String { deviceDirectory + "/state.json" }
    var deviceKeyPath: String { hardwareDirectory + "/uid.key" }
    /// The device agent's directory (0700) and socket (0600), when an agent serves the device.
    var agentDirectory: String { root + "/agent" }
    var agentSocketPath: String { agentDirectory + "/device.sock" }
}

/// What a device remembers across reboots: settings and the wrong-passcode counter. Nothing secret.
struct PersistedDeviceState: Codable, Sendable, Equatable {
    static let currentFormatVersion = 1

    var formatVersion = Self.currentFormatVersion
    var gracePeriodMilliseconds: Int64
    var wipeAfterFailures: Int?
    var failedPasscodeAttempts = 0
    var wiped = false

    var gracePeriod: Duration { .milliseconds(gracePeriodMilliseconds) }
    var attemptPolicy: PasscodeAttemptPolicy { PasscodeAttemptPolicy(wipeAfterFailures: wipeAfterFailures) }

    static func load(from path: String) throws -> PersistedDeviceState {
        let bytes = try SecureFile.read(path)
        let state: PersistedDeviceState
        do {
            state = try JSONDecoder().decode(PersistedDeviceState.self, from: Data(bytes))
        } catch {
            throw DeviceError.stateDamaged(path, "not valid device state JSON")
        }
        guard state.formatVersion == currentFormatVersion else {
            throw DeviceError.stateDamaged(path, "format version \(state.formatVersion) is not \(currentFormatVersion)")
        }
        return state
    }

    func write(to path: String, replacing: Bool = true) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try SecureFile.writeAtomically(Array(try encoder.encode(self)), to: path, replacing: replacing)
    }
}
