import TestSupport
import Foundation
import Testing

@testable import SecureKeys

@Suite("Keybag")
struct KeybagTests {
    let deviceKey: SecureBytes
    let passcode: SecureBytes

    init() throws {
        deviceKey = try SecureBytes.random(count: 32)
        passcode = try SecureBytes(utf8: "1234")
    }

    func makeKeybag() throws -> (keybag: Keybag, keys: ClassKeys) {
        try Keybag.create(passcode: passcode, deviceKey: deviceKey, kdf: .minimal)
    }

    /// The code of the `SecureKeysError` that `body` throws, `nil` when it throws none (another error fails the test).
    func code(of body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> SecureKeysError.Code? {
        thrownError(SecureKeysError.self, sourceLocation: sourceLocation, by: body)?.code
    }

    @Test("unlocking with the passcode returns the class keys set-up created, for all four classes")
    func unlockReturnsClassKeys() throws {
        let (keybag, created) = try makeKeybag()
        #expect(keybag.bytes.count == Keybag.fileLength)
        let unlocked = try keybag.unlock(passcode: passcode, deviceKey: deviceKey)
        #expect(unlocked.classes == Set(ProtectionClass.allCases))
        for protectionClass in ProtectionClass.allCases {
            #expect(unlocked[protectionClass]!.constantTimeEquals(created[protectionClass]!), "\(protectionClass)")
        }
        #expect(try SealedBox.publicKey(for: unlocked[.completeUnlessOpen]!) == keybag.completeUnlessOpenPublicKey)
        #expect(try keybag.unwrapNoneClassKey(deviceKey: deviceKey).constantTimeEquals(created[.none]!))
    }

    @Test("a wrong passcode fails with wrong-passcode")
    func wrongPasscode() throws {
        let (keybag, _) = try makeKeybag()
        #expect(code { _ = try keybag.unlock(passcode: try SecureBytes(utf8: "1235"), deviceKey: deviceKey) } == .wrongPasscode)
    }

    @Test("a keybag truncated at any byte is reported damaged, never parsed")
    func truncatedAtEveryByte() throws {
        let (keybag, _) = try makeKeybag()
        for length in 0..<keybag.bytes.count {
            let result = code { _ = try Keybag(bytes: Array(keybag.bytes[..<length]), deviceKey: deviceKey) }
            #expect(result == .keyFileDamaged, "length \(length)")
        }
    }

    @Test("a single flipped bit anywhere is reported damaged (or unsupported for the version byte)")
    func bitFlippedAnywhere() throws {
        let (keybag, _) = try makeKeybag()
        for index in keybag.bytes.indices {
            for bit in [0, 7] {
                var flipped = keybag.bytes
                flipped[index] ^= UInt8(1 << bit)
                let result = code { _ = try Keybag(bytes: flipped, deviceKey: deviceKey) }
                #expect(result == (index == 4 ? .unsupportedKeyFormat : .keyFileDamaged), "byte \(index) bit \(bit)")
            }
        }
    }

    @Test("a keybag from another device does not verify with this device's key")
    func keybagFromAnotherDevice() throws {
        let (keybag, _) = try makeKeybag()
        #expect(code { _ = try Keybag(bytes: keybag.bytes, deviceKey: try SecureBytes.random(count: 32)) } == .keyFileDamaged)
    }

    @Test("changing the passcode keeps the class keys, and only the new passcode unlocks")
    func changePasscode() throws {
        let (keybag, created) = try makeKeybag()
        let newPasscode = try SecureBytes(utf8: "987654")
        let changed = try keybag.changingPasscode(from: passcode, to: newPasscode, deviceKey: deviceKey)
        #expect(changed.generation == keybag.generation + 1)
        #expect(code { _ = try changed.unlock(passcode: passcode, deviceKey: deviceKey) } == .wrongPasscode)
        let unlocked = try changed.unlock(passcode: newPasscode, deviceKey: deviceKey)
        for protectionClass in ProtectionClass.allCases {
            #expect(unlocked[protectionClass]!.constantTimeEquals(created[protectionClass]!))
        }
        #expect(changed.completeUnlessOpenPublicKey == keybag.completeUnlessOpenPublicKey)
        #expect(code { _ = try keybag.changingPasscode(from: newPasscode, to: passcode, deviceKey: deviceKey) } == .wrongPasscode)
    }

    @Test("a written keybag is mode 0600, loads back, and contains no class key")
    func writeAndLoad() throws {
        let directory = TemporaryDirectory()
        let (keybag, keys) = try makeKeybag()
        let path = directory.file("device.keybag")
        try keybag.write(to: path)
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let loaded = try Keybag.load(from: path, deviceKey: deviceKey)
        #expect(loaded.bytes == keybag.bytes)
        let file = try Array(Data(contentsOf: URL(fileURLWithPath: path)))
        for protectionClass in ProtectionClass.allCases {
            let key = try keys[protectionClass]!.withUnsafeBytes { Array($0) }
            #expect(!file.hex.contains(key.hex))
        }
    }
}
