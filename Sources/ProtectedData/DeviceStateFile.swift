import DiskModel
import Foundation
import SecureKeys

/// Where a simulated device keeps its files inside a state directory.
///
/// `hardware/` stands for the phone's secure element: it holds the device key (the stand-in for the
/// hardware UID key), the one secret the simulation must keep unwrapped. Everything else is wrapped.
struct DeviceLayout: Sendable {
    let root: String
    /// The file system the device's files are written in.
    let fileSystem: FileSystem
    var deviceDirectory: String { root + "/device" }
    var hardwareDirectory: String { root + "/hardware" }
    var keybagPath: String { deviceDirectory + "/device.keybag" }
    var statePath: String { deviceDirectory + "/state.json" }
    var deviceKeyPath: String { hardwareDirectory + "/uid.key" }
    /// The device key's files, plain and sealed (``DeviceKeyFiles``).
    var keyFiles: DeviceKeyFiles { DeviceKeyFiles(stateDirectory: root, fileSystem: fileSystem) }
    /// Present from the start of a set-up until its state file is written.
    ///
    /// Key files beside it and no state file are what a set-up that stopped part-way left, which protect nothing
    /// yet.
    var setUpMarkerPath: String { deviceDirectory + "/set-up.incomplete" }
    /// The device agent's directory (0700) and socket (0600), when an agent serves the device.
    var agentDirectory: String { root + "/agent" }
    var agentSocketPath: String { agentDirectory + "/device.sock" }
    /// Names the socket of an agent that listens elsewhere, in the user's runtime directory
    /// (`AgentSocketLocation`).
    var agentSocketLocationPath: String { agentDirectory + "/socket-location" }
}

/// What a device remembers across reboots, its settings and the wrong-passcode counter.
///
/// Nothing secret, but authenticated. The file carries a tag keyed from the device key (see ``DeviceStateFile``),
/// and every field is range-checked when it is read.
struct PersistedDeviceState: Sendable, Equatable {
    var gracePeriodMilliseconds: Int64
    var wipeAfterFailures: Int?
    var failedPasscodeAttempts = 0
    var wiped = false

    var gracePeriod: Duration { .milliseconds(gracePeriodMilliseconds) }
    var attemptPolicy: PasscodeAttemptPolicy { PasscodeAttemptPolicy(wipeAfterFailures: wipeAfterFailures) }
}

/// The device state file, `device/state.json`.
///
/// It is JSON, mode 0600, replaced atomically.
///
/// Format version 2 (<doc:/SecureKeys/KeyFileFormats>, "Device state file"):
/// `formatVersion` 2, `gracePeriodMilliseconds` (0…100 years), `wipeAfterFailures` (`null` or 1…1,000,000),
/// `failedPasscodeAttempts` (0…1,000,000, and below `wipeAfterFailures` unless wiped), `wiped`, and `tag`:
/// 64 hex digits (`null` once wiped), BLAKE2b-256 keyed with
/// K_state = BLAKE2b(key: device key, "ProtectedStore.device-state.tag.v1") over the fields in a fixed binary
/// form (``canonicalBytes(of:)``), so key order and spacing do not matter.
///
/// Version 1 (no tag) is what devices made before wrote: it is accepted, range-checked, and rewritten as
/// version 2 at boot. A state that says `wiped` carries no tag and is honoured without one: it can only finish
/// destroying keys, which anyone able to write the file can do by deleting them.
enum DeviceStateFile {
    static let currentFormatVersion = 2
    static let tagLabel = "ProtectedStore.device-state.tag.v1"

    /// What a read found.
    ///
    /// It holds the state, its version, and its tag (version 2).
    struct Contents: Sendable {
        var state: PersistedDeviceState
        var formatVersion: Int
        var tag: [UInt8]?
    }

    /// The JSON shape. Numbers are decoded as `Int64` and checked before they become counts.
    private struct JSONForm: Codable {
        var formatVersion: Int64
        var gracePeriodMilliseconds: Int64
        var wipeAfterFailures: Int64?
        var failedPasscodeAttempts: Int64
        var wiped: Bool
        var tag: String?
    }

    /// Reads and range-checks the state file.
    ///
    /// The tag is checked later, with the device key (``verify(_:deviceKey:path:)``).
    ///
    /// - Throws: `DeviceError.Code.deviceStateDamaged` naming the field that is missing or out of range;
    ///   `SecureKeysError` when the file cannot be read.
    static func load(from path: String) throws -> Contents {
        let bytes = try SecureFile.read(path, maximumSize: 64 * 1024)
        let form: JSONForm
        do {
            form = try JSONDecoder().decode(JSONForm.self, from: Data(bytes))
        } catch let DecodingError.keyNotFound(key, _) {
            throw DeviceError.stateDamaged(path, "\(key.stringValue) is missing")
        } catch let DecodingError.typeMismatch(_, context), let DecodingError.valueNotFound(_, context),
            let DecodingError.dataCorrupted(context)
        {
            // A number past Int64, a fraction, text where a number belongs: named by its field when there is one.
            guard let field = context.codingPath.last?.stringValue ?? Self.fieldNotAWholeNumber(in: bytes) else {
                throw DeviceError.stateDamaged(path, "not valid device state JSON")
            }
            throw DeviceError.stateDamaged(path, "\(field) is not a value of its type (a whole number in range, true or false)")
        } catch {
            throw DeviceError.stateDamaged(path, "not valid device state JSON")
        }
        guard form.formatVersion == 1 || form.formatVersion == 2 else {
            throw DeviceError.stateDamaged(path, "format version \(form.formatVersion) is not 1 or \(currentFormatVersion)")
        }
        let maximumGrace = DeviceRules.maximumGracePeriod.milliseconds
        guard (0...maximumGrace).contains(form.gracePeriodMilliseconds) else {
            throw DeviceError.stateDamaged(
                path, "gracePeriodMilliseconds \(form.gracePeriodMilliseconds) is outside 0…\(maximumGrace)")
        }
        let wipeRange = DeviceRules.wipeAfterFailures
        if let wipeAfter = form.wipeAfterFailures, !(Int64(wipeRange.lowerBound)...Int64(wipeRange.upperBound)).contains(wipeAfter) {
            throw DeviceError.stateDamaged(
                path, "wipeAfterFailures \(wipeAfter) is outside \(wipeRange.lowerBound)…\(wipeRange.upperBound)")
        }
        let maximumFailures = Int64(DeviceRules.maximumFailedAttempts)
        guard (0...maximumFailures).contains(form.failedPasscodeAttempts) else {
            throw DeviceError.stateDamaged(
                path, "failedPasscodeAttempts \(form.failedPasscodeAttempts) is outside 0…\(maximumFailures)")
        }
        // An attempt is counted before it is checked: a count at wipe-after on a device not yet wiped is the
        // erasing attempt, interrupted (boot finishes its erase); past it, the file is wrong.
        if !form.wiped, let wipeAfter = form.wipeAfterFailures, form.failedPasscodeAttempts > wipeAfter {
            throw DeviceError.stateDamaged(
                path, "failedPasscodeAttempts \(form.failedPasscodeAttempts) is past wipeAfterFailures \(wipeAfter) on a device that is not wiped")
        }
        var tag: [UInt8]?
        switch (form.formatVersion, form.tag) {
        case (1, nil): tag = nil
        case (1, _?): throw DeviceError.stateDamaged(path, "a version-1 state has no tag")
        case (_, nil) where form.wiped: tag = nil
        case (_, nil): throw DeviceError.stateDamaged(path, "the tag is missing")
        case (_, let hex?):
            guard let bytes = Self.bytes(fromHex: hex), bytes.count == KeyDerivation.keyLength else {
                throw DeviceError.stateDamaged(path, "the tag is not \(KeyDerivation.keyLength * 2) hex digits")
            }
            tag = bytes
        }
        let state = PersistedDeviceState(
            gracePeriodMilliseconds: form.gracePeriodMilliseconds, wipeAfterFailures: form.wipeAfterFailures.map { Int($0) },
            failedPasscodeAttempts: Int(form.failedPasscodeAttempts), wiped: form.wiped)
        return Contents(state: state, formatVersion: Int(form.formatVersion), tag: tag)
    }

    /// The numeric fields read as any JSON number, to name the one that is not a whole `Int64`.
    ///
    /// Foundation's decoder reports a fraction or a number past `Int64` as invalid JSON, without the field.
    private struct NumbersOnly: Decodable {
        var formatVersion: Double?
        var gracePeriodMilliseconds: Double?
        var wipeAfterFailures: Double?
        var failedPasscodeAttempts: Double?
    }

    private static func fieldNotAWholeNumber(in bytes: [UInt8]) -> String? {
        guard let numbers = try? JSONDecoder().decode(NumbersOnly.self, from: Data(bytes)) else { return nil }
        let fields: [(String, Double?)] = [
            ("formatVersion", numbers.formatVersion), ("gracePeriodMilliseconds", numbers.gracePeriodMilliseconds),
            ("wipeAfterFailures", numbers.wipeAfterFailures), ("failedPasscodeAttempts", numbers.failedPasscodeAttempts),
        ]
        return fields.first { _, value in value.map { Int64(exactly: $0) == nil } ?? false }?.0
    }

    /// Checks a version-2 file's tag with this device's key. A version-1 file has none to check, and a wiped
    /// state needs none (its device key is gone, and what it says can only finish an erase).
    ///
    /// - Throws: `DeviceError.Code.deviceStateDamaged` when the tag does not verify: the file was altered (a
    ///   counter reset, say) or belongs to another device.
    static func verify(_ contents: Contents, deviceKey: SecureBytes, path: String) throws {
        guard !contents.state.wiped, contents.formatVersion >= 2 else { return }
        guard let tag = contents.tag else { throw DeviceError.stateDamaged(path, "the tag is missing") }
        guard KeyDerivation.constantTimeEquals(try self.tag(of: contents.state, deviceKey: deviceKey), tag) else {
            throw DeviceError.stateDamaged(
                path, "its integrity tag does not verify with this device's key (the file was altered, or belongs to another device)")
        }
    }

    /// Writes `state` as version 2, atomically.
    ///
    /// It is tagged with `deviceKey`, or untagged when it says wiped. An erase records itself without the device
    /// key, so it can be recorded again after the key is gone.
    ///
    /// - Throws: `SecureKeysError` when the write fails; the previous file is then intact.
    static func write(
        _ state: PersistedDeviceState, deviceKey: SecureBytes?, to path: String, replacing: Bool = true, in fileSystem: FileSystem
    ) throws {
        precondition(state.wiped || deviceKey != nil, "a device state that is not wiped is written with its tag")
        let form = JSONForm(
            formatVersion: Int64(currentFormatVersion), gracePeriodMilliseconds: state.gracePeriodMilliseconds,
            wipeAfterFailures: state.wipeAfterFailures.map { Int64($0) },
            failedPasscodeAttempts: Int64(state.failedPasscodeAttempts), wiped: state.wiped,
            tag: try deviceKey.flatMap { state.wiped ? nil : hex(try tag(of: state, deviceKey: $0)) })
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try SecureFile.writeAtomically(Array(try encoder.encode(form)), to: path, replacing: replacing, in: fileSystem)
    }

    /// The fields in a fixed binary form, the tag's message.
    ///
    /// They are the format version (u32), the grace period in milliseconds (i64), `wipeAfterFailures` (i64, −1
    /// for none), `failedPasscodeAttempts` (i64), `wiped` (one byte 0 or 1), all big-endian.
    static func canonicalBytes(of state: PersistedDeviceState) -> [UInt8] {
        var bytes: [UInt8] = []
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) } }
        append(UInt32(currentFormatVersion))
        append(state.gracePeriodMilliseconds)
        append(Int64(state.wipeAfterFailures ?? -1))
        append(Int64(state.failedPasscodeAttempts))
        append(UInt8(state.wiped ? 1 : 0))
        return bytes
    }

    private static func tag(of state: PersistedDeviceState, deviceKey: SecureBytes) throws -> [UInt8] {
        let tagKey = try KeyDerivation.derive(label: tagLabel, from: deviceKey)
        defer { tagKey.wipe() }
        return try KeyDerivation.authenticationTag(for: canonicalBytes(of: state)[...], key: tagKey)
    }

    private static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }

    private static func bytes(fromHex text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: utf8.count, by: 2) {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }
}
