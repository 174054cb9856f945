import Foundation
import Synchronization
import TestSupport
import Testing

@testable import SecureKeys

/// A stand-in for the TPM in tests of the keybag alone: it keeps each sealed secret with its authValue in
/// memory and refuses any other authValue, counting the refusals as the TPM's lockout counter would.
final class MemoryPasscodeSecretSealer: PasscodeSecretSealer {
    private struct Sealed {
        var secret: [UInt8]
        var authValue: [UInt8]
    }

    private let sealed = Mutex<[[UInt8]: Sealed]>([:])
    private let refusals = Atomic<Int>(0)

    /// How many authValues were refused.
    var refused: Int { refusals.load(ordering: .relaxed) }

    func sealPasscodeSecret(_ secret: SecureBytes, authValue: SecureBytes) throws -> [UInt8] {
        let record = Array("memory-sealed-".utf8) + (0..<8).map { _ in UInt8.random(in: 0...255) }
        let entry = Sealed(secret: try secret.withUnsafeBytes { Array($0) }, authValue: try authValue.withUnsafeBytes { Array($0) })
        sealed.withLock { $0[record] = entry }
        return record
    }

    func unsealPasscodeSecret(_ record: [UInt8], authValue: SecureBytes) throws -> SecureBytes {
        guard let entry = sealed.withLock({ $0[record] }) else { throw SecureKeysError.damaged("unknown sealed record") }
        guard try authValue.withUnsafeBytes({ Array($0) }) == entry.authValue else {
            refusals.add(1, ordering: .relaxed)
            throw SecureKeysError.wrongPasscode()
        }
        return try entry.secret.withUnsafeBytes { try SecureBytes(copying: $0) }
    }
}

/// The keybag whose passcode classes also need a secret the TPM releases for the passcode (format v2).
@Suite("Keybag version 2")
struct KeybagV2Tests {
    let deviceKey: SecureBytes
    let passcode: SecureBytes

    init() throws {
        deviceKey = try SecureBytes.random(count: 32)
        passcode = try SecureBytes(utf8: "1234")
    }

    /// The code of the `SecureKeysError` that `body` throws, `nil` when it throws none (another error fails the test).
    func code(of body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> SecureKeysError.Code? {
        thrownError(SecureKeysError.self, sourceLocation: sourceLocation, by: body)?.code
    }

    @Test("with a sealer the keybag is version 2 and holds the sealed record; it unlocks only through the sealer, which refuses a wrong passcode")
    func unlocksThroughTheSealer() throws {
        let sealer = MemoryPasscodeSecretSealer()
        let (keybag, keys) = try Keybag.create(passcode: passcode, deviceKey: deviceKey, kdf: .minimal, sealer: sealer)
        #expect(keybag.version == 2)
        #expect(keybag.bytes[4] == 2)
        let record = try #require(keybag.sealedPasscodeSecret)
        #expect(keybag.bytes.count == Keybag.fileLength + 4 + record.count)

        // The device key and the keybag alone test no passcode: without the sealer nothing unwraps.
        #expect(code { _ = try keybag.unlock(passcode: passcode, deviceKey: deviceKey) } == .invalidArgument)
        #expect(code { _ = try keybag.unlock(passcode: try SecureBytes(utf8: "1235"), deviceKey: deviceKey, sealer: sealer) } == .wrongPasscode)
        #expect(sealer.refused == 1, "the wrong passcode was refused by the sealer, not by an offline check")
        let unlocked = try keybag.unlock(passcode: passcode, deviceKey: deviceKey, sealer: sealer)
        for protectionClass in ProtectionClass.allCases {
            #expect(unlocked[protectionClass]!.constantTimeEquals(keys[protectionClass]!))
        }
        // Read back from its bytes, it is the same keybag.
        let parsed = try Keybag(bytes: keybag.bytes, deviceKey: deviceKey)
        #expect(parsed.sealedPasscodeSecret == record)
        #expect(try parsed.unlock(passcode: passcode, deviceKey: deviceKey, sealer: sealer)[.complete]!.constantTimeEquals(keys[.complete]!))
    }

    @Test("the right passcode with another passcode secret does not unwrap: the secret is part of the key")
    func anotherSecretDoesNotUnwrap() throws {
        let sealer = MemoryPasscodeSecretSealer()
        let (keybag, _) = try Keybag.create(passcode: passcode, deviceKey: deviceKey, kdf: .minimal, sealer: sealer)
        struct OtherSecret: PasscodeSecretSealer {
            func sealPasscodeSecret(_ secret: SecureBytes, authValue: SecureBytes) throws -> [UInt8] { [1] }
            func unsealPasscodeSecret(_ sealed: [UInt8], authValue: SecureBytes) throws -> SecureBytes {
                try SecureBytes.random(count: 32)
            }
        }
        #expect(code { _ = try keybag.unlock(passcode: passcode, deviceKey: deviceKey, sealer: OtherSecret()) } == .keyFileDamaged)
    }

    @Test("a passcode change keeps version 2 with a new sealed secret; options and the move from version 1 need the passcode")
    func changeAndMigration() throws {
        let sealer = MemoryPasscodeSecretSealer()
        let (v1, keys) = try Keybag.create(passcode: passcode, deviceKey: deviceKey, kdf: .minimal)
        #expect(v1.version == 1 && v1.sealedPasscodeSecret == nil)
        #expect(code { _ = try v1.sealingPasscodeSecret(passcode: try SecureBytes(utf8: "0000"), deviceKey: deviceKey, sealer: sealer) } == .wrongPasscode)
        let v2 = try v1.sealingPasscodeSecret(passcode: passcode, deviceKey: deviceKey, sealer: sealer)
        #expect(v2.version == 2 && v2.generation == v1.generation && v2.options == v1.options)
        #expect(try v2.unlock(passcode: passcode, deviceKey: deviceKey, sealer: sealer)[.complete]!.constantTimeEquals(keys[.complete]!))

        let newPasscode = try SecureBytes(utf8: "98765")
        let changed = try v2.changingPasscode(from: passcode, to: newPasscode, deviceKey: deviceKey, sealer: sealer)
        #expect(changed.version == 2 && changed.generation == 1)
        #expect(changed.sealedPasscodeSecret != v2.sealedPasscodeSecret)
        #expect(code { _ = try changed.unlock(passcode: passcode, deviceKey: deviceKey, sealer: sealer) } == .wrongPasscode)
        #expect(try changed.unlock(passcode: newPasscode, deviceKey: deviceKey, sealer: sealer)[.completeUnlessOpen]!
            .constantTimeEquals(keys[.completeUnlessOpen]!))
        let recorded = try changed.adding([.authenticatedDeviceState], passcode: newPasscode, deviceKey: deviceKey, sealer: sealer)
        #expect(recorded.version == 2 && recorded.options.contains(.authenticatedDeviceState))
    }

    @Test("a keybag version this build does not know is unsupported-key-format naming the version; a v2 length that does not add up is damaged")
    func unknownVersionAndBadLength() throws {
        let sealer = MemoryPasscodeSecretSealer()
        let (keybag, _) = try Keybag.create(passcode: passcode, deviceKey: deviceKey, kdf: .minimal, sealer: sealer)
        var bytes = keybag.bytes
        bytes[4] = 3
        do {
            _ = try Keybag(bytes: bytes, deviceKey: deviceKey, path: "device.keybag")
            Issue.record("a version-3 keybag was read")
        } catch let error as SecureKeysError {
            #expect(error.code == .unsupportedKeyFormat)
            #expect("\(error)".contains("keybag version 3"), "\(error)")
        }
        #expect(code { _ = try Keybag(bytes: keybag.bytes + [0], deviceKey: deviceKey) } == .keyFileDamaged)
        #expect(code { _ = try Keybag(bytes: Array(keybag.bytes.dropLast()), deviceKey: deviceKey) } == .keyFileDamaged)
        var flipped = keybag.bytes
        flipped[Keybag.entriesEnd + 6] ^= 1  // a byte of the sealed record: the tag covers it
        #expect(code { _ = try Keybag(bytes: flipped, deviceKey: deviceKey) } == .keyFileDamaged)
    }
}
