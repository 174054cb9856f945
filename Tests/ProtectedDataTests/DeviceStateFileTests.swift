import TestSupport
import Foundation
import SecureKeys
import Testing

@testable import ProtectedData

/// The device state file (`device/state.json`) as an attacker or bad luck leaves it: every value is
/// range-checked, the file is authenticated with the device key, and nothing read from it can trap.
@Suite("Simulated device: the state file is authenticated and range-checked")
struct DeviceStateFileTests {
    /// A device with `failures` wrong passcodes counted, powered off, and the paths of its files.
    private func deviceWithFailures(_ failures: Int, wipeAfter: Int? = nil) throws -> DeviceFixture {
        let fixture = try DeviceFixture(wipeAfterFailures: wipeAfter)
        try fixture.reboot()
        for _ in 0..<failures { _ = errorCode { try fixture.unlock("0000") } }
        #expect(fixture.device.failedPasscodeAttempts == failures)
        fixture.device.powerOff()
        return fixture
    }

    private func statePath(_ fixture: DeviceFixture) -> String { fixture.directory.file("device/state.json") }

    /// The state file as a JSON object.
    private func readJSON(_ fixture: DeviceFixture) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: statePath(fixture)))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// Rewrites the state file with `change` applied to its JSON object (mode 0600 kept).
    private func editJSON(_ fixture: DeviceFixture, _ change: (inout [String: Any]) -> Void) throws {
        var object = try readJSON(fixture)
        change(&object)
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: statePath(fixture)))
    }

    /// The device key, as an attacker who can read the state directory reads it.
    private func deviceKey(_ fixture: DeviceFixture) throws -> SecureBytes {
        try SecureFile.readSecret(fixture.directory.file("hardware/uid.key"))
    }

    /// The error a boot of the fixture's directory throws.
    private func bootError(_ fixture: DeviceFixture) -> (any Error)? {
        do {
            fixture.device = try KeybagDevice(bootingFrom: fixture.directory.path, clock: fixture.clock)
            return nil
        } catch {
            return error
        }
    }

    @Test("a counter reset to 0 in the state file is refused at boot as device-state-damaged (the tag does not verify); the file is left as it is")
    func counterResetIsRefused() throws {
        let fixture = try deviceWithFailures(5)
        try editJSON(fixture) { $0["failedPasscodeAttempts"] = 0 }
        let before = try Data(contentsOf: URL(fileURLWithPath: statePath(fixture)))
        let error = try #require(bootError(fixture) as? DeviceError)
        #expect(error.code == .deviceStateDamaged)
        #expect(error.message.contains("integrity tag"), "\(error.message)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: statePath(fixture))) == before, "the damaged state was rewritten")
    }

    @Test("the state of another device is refused: its tag does not verify with this device's key")
    func stateOfAnotherDeviceIsRefused() throws {
        let mine = try deviceWithFailures(5)
        let other = try deviceWithFailures(0)
        try FileManager.default.removeItem(atPath: statePath(mine))
        try FileManager.default.copyItem(atPath: statePath(other), toPath: statePath(mine))
        #expect((bootError(mine) as? DeviceError)?.code == .deviceStateDamaged)
    }

    @Test(
        "every field out of range is device-state-damaged naming the field, even with a valid tag (written by someone holding the device key)",
        arguments: [
            ("failedPasscodeAttempts", -1_000_000), ("failedPasscodeAttempts", Int.max), ("wipeAfterFailures", -1),
            ("wipeAfterFailures", 0), ("gracePeriodMilliseconds", -1), ("gracePeriodMilliseconds", Int.max),
        ])
    func outOfRangeFieldsAreRefused(field: String, value: Int) throws {
        let fixture = try deviceWithFailures(2, wipeAfter: 10)
        var state = PersistedDeviceState(gracePeriodMilliseconds: 10_000, wipeAfterFailures: 10, failedPasscodeAttempts: 2)
        switch field {
        case "failedPasscodeAttempts": state.failedPasscodeAttempts = value
        case "wipeAfterFailures": state.wipeAfterFailures = value
        default: state.gracePeriodMilliseconds = Int64(value)
        }
        let key = try deviceKey(fixture)
        defer { key.wipe() }
        try DeviceStateFile.write(state, deviceKey: key, to: statePath(fixture), in: .real)
        let error = try #require(bootError(fixture) as? DeviceError, "a state with \(field) \(value) was accepted")
        #expect(error.code == .deviceStateDamaged)
        #expect(error.message.contains(field), "\(error.message)")
    }

    @Test(
        "a field of the wrong type, past Int64 or missing is device-state-damaged naming the field",
        arguments: [
            ("failedPasscodeAttempts", "1e30"), ("failedPasscodeAttempts", "2.5"), ("wipeAfterFailures", "\"ten\""),
            ("wiped", "\"yes\""), ("gracePeriodMilliseconds", "null"), ("failedPasscodeAttempts", "missing"),
        ])
    func malformedFieldsAreNamed(field: String, json: String) throws {
        let fixture = try deviceWithFailures(0)
        var text = ""
        for (name, value) in [
            ("formatVersion", "1"), ("gracePeriodMilliseconds", "10000"), ("wipeAfterFailures", "10"),
            ("failedPasscodeAttempts", "0"), ("wiped", "false"),
        ] {
            let written = name == field ? json : value
            if written != "missing" { text += (text.isEmpty ? "" : ", ") + "\"\(name)\": \(written)" }
        }
        try Data("{\(text)}".utf8).write(to: URL(fileURLWithPath: statePath(fixture)))
        let error = try #require(bootError(fixture) as? DeviceError)
        #expect(error.code == .deviceStateDamaged)
        #expect(error.message.contains(field), "\(error.message)")
    }

    @Test("a counter at or over wipe-after on a device that is not wiped is device-state-damaged")
    func counterOverWipeAfterIsRefused() throws {
        let fixture = try deviceWithFailures(2, wipeAfter: 10)
        let key = try deviceKey(fixture)
        defer { key.wipe() }
        let state = PersistedDeviceState(gracePeriodMilliseconds: 10_000, wipeAfterFailures: 10, failedPasscodeAttempts: 11)
        try DeviceStateFile.write(state, deviceKey: key, to: statePath(fixture), in: .real)
        let error = try #require(bootError(fixture) as? DeviceError)
        #expect(error.code == .deviceStateDamaged)
        #expect(error.message.contains("wipeAfterFailures"), "\(error.message)")
    }

    @Test("a version-1 state (no tag) with Int64.max failed attempts is refused, so one wrong passcode cannot trap on it")
    func hugeCounterInVersionOneIsRefused() throws {
        let fixture = try deviceWithFailures(1)
        try editJSON(fixture) { object in
            object["formatVersion"] = 1
            object["tag"] = nil
            object["failedPasscodeAttempts"] = Int64.max
        }
        let error = try #require(bootError(fixture) as? DeviceError)
        #expect(error.code == .deviceStateDamaged)
        #expect(error.message.contains("failedPasscodeAttempts"), "\(error.message)")
    }

    @Test("a version-1 state with wipeAfterFailures -1 is refused rather than wiping at the first typo")
    func negativeWipeAfterInVersionOneIsRefused() throws {
        let fixture = try deviceWithFailures(0)
        try editJSON(fixture) { object in
            object["formatVersion"] = 1
            object["tag"] = nil
            object["wipeAfterFailures"] = -1
        }
        let error = try #require(bootError(fixture) as? DeviceError)
        #expect(error.code == .deviceStateDamaged)
        #expect(error.message.contains("wipeAfterFailures"), "\(error.message)")
        #expect(FileManager.default.fileExists(atPath: fixture.directory.file("device/device.keybag")))
    }

    /// Makes the fixture's device look like one set up before the state file was authenticated: its keybag
    /// without the option that says so.
    private func makeLegacyKeybag(_ fixture: DeviceFixture) throws {
        let key = try deviceKey(fixture)
        defer { key.wipe() }
        let path = fixture.directory.file("device/device.keybag")
        let keybag = try Keybag.load(from: path, deviceKey: key)
        try keybag.removing([.authenticatedDeviceState], passcode: try SecureBytes(utf8: "1234"), deviceKey: key).write(to: path)
    }

    @Test("a counter set back by rewriting the state file as an untagged version-1 file is refused: the keybag says the state is authenticated")
    func versionOneRollbackIsRefused() throws {
        let fixture = try deviceWithFailures(5)
        try editJSON(fixture) { object in
            object["formatVersion"] = 1
            object["tag"] = nil
            object["failedPasscodeAttempts"] = 0
        }
        let error = try #require(bootError(fixture) as? DeviceError)
        #expect(error.code == .deviceStateDamaged)
        #expect(error.message.contains("version-1"), "\(error.message)")
    }

    @Test("a version-1 state from an existing device boots with its counter and is rewritten as version 2, tagged; its first unlock makes a later version-1 file refused")
    func versionOneIsUpgraded() throws {
        let fixture = try deviceWithFailures(3)
        try makeLegacyKeybag(fixture)
        // What the version-1 code wrote: no tag.
        let legacy = """
            {
              "failedPasscodeAttempts" : 3,
              "formatVersion" : 1,
              "gracePeriodMilliseconds" : 10000,
              "wiped" : false
            }
            """
        try Data(legacy.utf8).write(to: URL(fileURLWithPath: statePath(fixture)))
        fixture.device = try KeybagDevice(bootingFrom: fixture.directory.path, clock: fixture.clock)
        #expect(fixture.device.failedPasscodeAttempts == 3)
        fixture.device.powerOff()
        let upgraded = try readJSON(fixture)
        #expect(upgraded["formatVersion"] as? Int == 2)
        #expect((upgraded["tag"] as? String)?.count == 64)
        // Now tagged: a reset is refused.
        try editJSON(fixture) { $0["failedPasscodeAttempts"] = 0 }
        #expect((bootError(fixture) as? DeviceError)?.code == .deviceStateDamaged)
        // Until the first unlock records the option, a version-1 file is still an old device's.
        try Data(legacy.utf8).write(to: URL(fileURLWithPath: statePath(fixture)))
        fixture.device = try KeybagDevice(bootingFrom: fixture.directory.path, clock: fixture.clock)
        fixture.clock.advance(by: .seconds(60))
        try fixture.unlock("1234")
        fixture.device.powerOff()
        try Data(legacy.utf8).write(to: URL(fileURLWithPath: statePath(fixture)))
        #expect((bootError(fixture) as? DeviceError)?.code == .deviceStateDamaged, "a version-1 file after the option was recorded")
    }

    @Test("a 16-byte uid.key is reported as a damaged device key, naming hardware/uid.key, not blamed on the keybag")
    func shortDeviceKeyIsNamed() throws {
        let fixture = try deviceWithFailures(0)
        let keyPath = fixture.directory.file("hardware/uid.key")
        try Data(repeating: 7, count: 16).write(to: URL(fileURLWithPath: keyPath))
        let error = try #require(bootError(fixture) as? SecureKeysError)
        #expect(error.code == .keyFileDamaged)
        #expect(error.path == keyPath)
        #expect(error.message.contains("uid.key") && error.message.contains("16 bytes"), "\(error.message)")
        #expect(!error.message.contains("keybag"), "\(error.message)")
    }

    @Test("a wrong passcode at the largest count the file accepts saturates instead of trapping")
    func counterSaturates() throws {
        #expect(PasscodeAttemptPolicy.failures(afterOneMore: Int.max) == DeviceRules.maximumFailedAttempts)
        #expect(PasscodeAttemptPolicy.failures(afterOneMore: DeviceRules.maximumFailedAttempts) == DeviceRules.maximumFailedAttempts)
        #expect(PasscodeAttemptPolicy.failures(afterOneMore: -5) == 1)
        #expect(PasscodeAttemptPolicy.failures(afterOneMore: 4) == 5)
        #expect(PasscodeAttemptPolicy().delay(afterFailures: .min) == .zero)
    }
}
