import TestSupport
import Foundation
import Testing

@testable import SecureKeys

/// The key file formats are pinned by known-answer vectors in keys/vectors/: each test decrypts the stored
/// file with the stated test-only secrets, and rebuilds it from the same seed byte for byte, so an accidental
/// format change fails here. Set PROTECTEDSTORE_RECORD_VECTORS=1 to (re)write them after a deliberate change.
@Suite("Known-answer vectors")
struct KnownAnswerVectorTests {
    static let vectorsDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("keys/vectors")
    static let recording = ProcessInfo.processInfo.environment["PROTECTEDSTORE_RECORD_VECTORS"] == "1"

    struct KeybagVector: Codable {
        var description: String
        var passcode: String
        var deviceKey: String
        var seed: String
        var opsLimit: UInt64
        var memLimit: UInt64
        var file: String
        var classKeys: [String: String]
        var completeUnlessOpenPublicKey: String
    }

    struct StoreKeyVector: Codable {
        var description: String
        var protectionClass: String
        var classKey: String
        var seed: String
        var file: String
        var storeKey: String
    }

    struct InboxVector: Codable {
        var description: String
        var storeKey: String
        var seed: String
        var keyFile: String
        var privateKey: String
        var record: String
        var recordID: String
        var recordKey: String
        var recordValue: String
    }

    static func load<T: Decodable>(_ name: String, as type: T.Type) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(contentsOf: vectorsDirectory.appendingPathComponent(name)))
    }

    static func record<T: Encodable>(_ value: T, as name: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try (encoder.encode(value) + Data("\n".utf8)).write(to: vectorsDirectory.appendingPathComponent(name))
    }

    static func secret(_ hex: String) throws -> SecureBytes {
        try [UInt8](hex: hex).withUnsafeBytes { try SecureBytes(copying: $0) }
    }

    static func hex(_ secret: SecureBytes) throws -> String { try secret.withUnsafeBytes { Array($0) }.hex }

    @Test("keybag v1: the vector unlocks with its test-only passcode and is reproduced byte for byte")
    func keybagVector() throws {
        if Self.recording {
            let deviceKey = try SecureBytes.random(count: 32, using: SeededRandom(seed: Array("device-key".utf8)))
            let seed = "keybag-v1"
            let (keybag, keys) = try Keybag.create(
                passcode: try SecureBytes(utf8: "0000-test-only"), deviceKey: deviceKey, kdf: .minimal,
                random: SeededRandom(seed: Array(seed.utf8)))
            var classKeys: [String: String] = [:]
            for protectionClass in ProtectionClass.allCases { classKeys[protectionClass.name] = try Self.hex(keys[protectionClass]!) }
            try Self.record(
                KeybagVector(
                    description: "Keybag format v1. TEST-ONLY passcode and device key: never use them for real data.",
                    passcode: "0000-test-only", deviceKey: try Self.hex(deviceKey), seed: seed,
                    opsLimit: PasscodeKDF.minimal.opsLimit, memLimit: PasscodeKDF.minimal.memLimit,
                    file: keybag.bytes.hex, classKeys: classKeys,
                    completeUnlessOpenPublicKey: keybag.completeUnlessOpenPublicKey.hex),
                as: "keybag-v1.json")
        }
        let vector = try Self.load("keybag-v1.json", as: KeybagVector.self)
        let deviceKey = try Self.secret(vector.deviceKey)

        // Decrypt the stored file.
        let keybag = try Keybag(bytes: [UInt8](hex: vector.file), deviceKey: deviceKey)
        #expect(keybag.kdf == PasscodeKDF(opsLimit: vector.opsLimit, memLimit: vector.memLimit))
        #expect(keybag.completeUnlessOpenPublicKey.hex == vector.completeUnlessOpenPublicKey)
        let keys = try keybag.unlock(passcode: try SecureBytes(utf8: vector.passcode), deviceKey: deviceKey)
        for protectionClass in ProtectionClass.allCases {
            #expect(try Self.hex(keys[protectionClass]!) == vector.classKeys[protectionClass.name], "\(protectionClass)")
        }

        // Reproduce it from the same seed.
        let rebuilt = try Keybag.create(
            passcode: try SecureBytes(utf8: vector.passcode), deviceKey: deviceKey,
            kdf: PasscodeKDF(opsLimit: vector.opsLimit, memLimit: vector.memLimit),
            random: SeededRandom(seed: Array(vector.seed.utf8)))
        #expect(rebuilt.keybag.bytes.hex == vector.file)
    }

    struct KeybagV2Vector: Codable {
        var description: String
        var passcode: String
        var deviceKey: String
        var seed: String
        var opsLimit: UInt64
        var memLimit: UInt64
        var passcodeSecret: String
        var authValue: String
        var sealedPasscodeSecret: String
        var file: String
        var classKeys: [String: String]
        var completeUnlessOpenPublicKey: String
    }

    /// The TPM of a keybag v2 vector: it "seals" by returning the vector's fixed record, after checking that it
    /// is asked to seal the vector's secret under the vector's authValue, and "unseals" that record only for that
    /// authValue. The TPM's own part cannot be a known answer; the layout and the derivation given `S` can.
    struct VectorSealer: PasscodeSecretSealer {
        var record: [UInt8]
        var secret: [UInt8]?
        var authValue: [UInt8]?

        func sealPasscodeSecret(_ secret: SecureBytes, authValue: SecureBytes) throws -> [UInt8] {
            if let expected = self.secret, try secret.withUnsafeBytes({ Array($0) }) != expected {
                throw SecureKeysError.invalidArgument("not the vector's passcode secret")
            }
            if let expected = self.authValue, try authValue.withUnsafeBytes({ Array($0) }) != expected {
                throw SecureKeysError.invalidArgument("not the vector's authValue")
            }
            return record
        }

        func unsealPasscodeSecret(_ sealed: [UInt8], authValue: SecureBytes) throws -> SecureBytes {
            guard sealed == record, let secret, try authValue.withUnsafeBytes({ Array($0) }) == self.authValue else {
                throw SecureKeysError.wrongPasscode()
            }
            return try secret.withUnsafeBytes { try SecureBytes(copying: $0) }
        }
    }

    @Test("keybag v2: the vector unlocks with its test-only passcode and passcode secret, its authValue is derived as specified, and it is reproduced byte for byte")
    func keybagV2Vector() throws {
        let record = Array("TEST-ONLY sealed passcode secret record (a TPM's would be here)".utf8)
        if Self.recording {
            let deviceKey = try SecureBytes.random(count: 32, using: SeededRandom(seed: Array("device-key".utf8)))
            let seed = "keybag-v2"
            final class Capture: PasscodeSecretSealer, @unchecked Sendable {  // used by this one test, one thread
                let record: [UInt8]
                var secret: [UInt8] = []
                var authValue: [UInt8] = []
                init(record: [UInt8]) { self.record = record }
                func sealPasscodeSecret(_ secret: SecureBytes, authValue: SecureBytes) throws -> [UInt8] {
                    self.secret = try secret.withUnsafeBytes { Array($0) }
                    self.authValue = try authValue.withUnsafeBytes { Array($0) }
                    return record
                }
                func unsealPasscodeSecret(_ sealed: [UInt8], authValue: SecureBytes) throws -> SecureBytes {
                    try secret.withUnsafeBytes { try SecureBytes(copying: $0) }
                }
            }
            let capture = Capture(record: record)
            let (keybag, keys) = try Keybag.create(
                passcode: try SecureBytes(utf8: "0000-test-only"), deviceKey: deviceKey, kdf: .minimal, sealer: capture,
                random: SeededRandom(seed: Array(seed.utf8)))
            var classKeys: [String: String] = [:]
            for protectionClass in ProtectionClass.allCases { classKeys[protectionClass.name] = try Self.hex(keys[protectionClass]!) }
            try Self.record(
                KeybagV2Vector(
                    description: "Keybag format v2. TEST-ONLY passcode, device key and passcode secret S: never use them for real data. "
                        + "The sealed record is a placeholder: a real one is a TPM object only that TPM loads.",
                    passcode: "0000-test-only", deviceKey: try Self.hex(deviceKey), seed: seed,
                    opsLimit: PasscodeKDF.minimal.opsLimit, memLimit: PasscodeKDF.minimal.memLimit,
                    passcodeSecret: capture.secret.hex, authValue: capture.authValue.hex, sealedPasscodeSecret: record.hex,
                    file: keybag.bytes.hex, classKeys: classKeys,
                    completeUnlessOpenPublicKey: keybag.completeUnlessOpenPublicKey.hex),
                as: "keybag-v2.json")
        }
        let vector = try Self.load("keybag-v2.json", as: KeybagV2Vector.self)
        let deviceKey = try Self.secret(vector.deviceKey)
        let sealer = VectorSealer(
            record: [UInt8](hex: vector.sealedPasscodeSecret), secret: [UInt8](hex: vector.passcodeSecret),
            authValue: [UInt8](hex: vector.authValue))
        let kdf = PasscodeKDF(opsLimit: vector.opsLimit, memLimit: vector.memLimit)

        // Decrypt the stored file.
        let keybag = try Keybag(bytes: [UInt8](hex: vector.file), deviceKey: deviceKey)
        #expect(keybag.version == 2)
        #expect(keybag.kdf == kdf)
        #expect(keybag.sealedPasscodeSecret?.hex == vector.sealedPasscodeSecret)
        #expect(keybag.completeUnlessOpenPublicKey.hex == vector.completeUnlessOpenPublicKey)
        // authValue = BLAKE2b(key: Argon2id(passcode, salt), "ProtectedStore.tpm-passcode-auth.v1"), salt at offset 24.
        let passcodeKey = try kdf.deriveKey(from: try SecureBytes(utf8: vector.passcode), salt: Array(keybag.bytes[24..<40]))
        #expect(try Self.hex(Keybag.passcodeAuthValue(passcodeKey: passcodeKey)) == vector.authValue)
        let keys = try keybag.unlock(passcode: try SecureBytes(utf8: vector.passcode), deviceKey: deviceKey, sealer: sealer)
        for protectionClass in ProtectionClass.allCases {
            #expect(try Self.hex(keys[protectionClass]!) == vector.classKeys[protectionClass.name], "\(protectionClass)")
        }

        // Reproduce it from the same seed.
        let rebuilt = try Keybag.create(
            passcode: try SecureBytes(utf8: vector.passcode), deviceKey: deviceKey, kdf: kdf, sealer: sealer,
            random: SeededRandom(seed: Array(vector.seed.utf8)))
        #expect(rebuilt.keybag.bytes.hex == vector.file)
    }

    @Test("store key file v1: the vector unwraps with its test-only class key, reads as store format 1, and is reproduced byte for byte")
    func storeKeyVector() throws {
        // store-key-v1.json is never re-recorded: v1 key files are no longer written, and must still open.
        let vector = try Self.load("store-key-v1.json", as: StoreKeyVector.self)
        let classKey = try Self.secret(vector.classKey)
        let file = try StoreKeyFile(bytes: [UInt8](hex: vector.file))
        #expect(file.version == 1)
        #expect(file.protectionClass.name == vector.protectionClass)
        #expect(file.storeFormat == .sqlcipher3Raw4096, "a v1 key file records no format: its store is format 1")
        #expect(try Self.hex(file.unwrap(with: classKey)) == vector.storeKey)

        let rebuilt = try StoreKeyFile.make(
            protectionClass: try #require(ProtectionClass(name: vector.protectionClass)), classKey: classKey,
            storeFormat: .sqlcipher3Raw4096, version: 1, random: SeededRandom(seed: Array(vector.seed.utf8)))
        #expect(rebuilt.file.bytes.hex == vector.file)
    }

    @Test("store key file v2: the vector unwraps with its test-only class key, records store format 1, and is reproduced byte for byte")
    func storeKeyV2Vector() throws {
        if Self.recording {
            let classKey = try SecureBytes.random(count: 32, using: SeededRandom(seed: Array("class-key".utf8)))
            let seed = "store-key-v2"
            let (file, storeKey) = try StoreKeyFile.make(
                protectionClass: .complete, classKey: classKey, random: SeededRandom(seed: Array(seed.utf8)))
            try Self.record(
                StoreKeyVector(
                    description: "Store key file format v2, store format 1 (sqlcipher3-raw-4096). TEST-ONLY class key: never use it for real data.",
                    protectionClass: ProtectionClass.complete.name, classKey: try Self.hex(classKey), seed: seed,
                    file: file.bytes.hex, storeKey: try Self.hex(storeKey)),
                as: "store-key-v2.json")
        }
        let vector = try Self.load("store-key-v2.json", as: StoreKeyVector.self)
        let classKey = try Self.secret(vector.classKey)
        let file = try StoreKeyFile(bytes: [UInt8](hex: vector.file))
        #expect(file.version == 2)
        #expect(file.bytes[6] == 1, "offset 6 records the store format")
        #expect(file.storeFormat == .sqlcipher3Raw4096)
        #expect(file.protectionClass.name == vector.protectionClass)
        #expect(try Self.hex(file.unwrap(with: classKey)) == vector.storeKey)

        let rebuilt = try StoreKeyFile.make(
            protectionClass: try #require(ProtectionClass(name: vector.protectionClass)), classKey: classKey,
            random: SeededRandom(seed: Array(vector.seed.utf8)))
        #expect(rebuilt.file.bytes.hex == vector.file)
    }

    @Test("inbox key file v1 is reproduced byte for byte; an inbox record v1 opens to a version-1 payload with its id")
    func inboxVector() throws {
        // inbox-v1.json is never re-recorded: v1 records are no longer written, and must still open and merge
        // (the payload is checked in ProtectedStoreTests' InboxFormatTests).
        let vector = try Self.load("inbox-v1.json", as: InboxVector.self)
        let storeKey = try Self.secret(vector.storeKey)
        let file = try InboxKeyFile(bytes: [UInt8](hex: vector.keyFile))
        let privateKey = try file.unwrapPrivateKey(storeKey: storeKey)
        #expect(try Self.hex(privateKey) == vector.privateKey)
        let rebuilt = try InboxKeyFile.make(storeKey: storeKey, random: SeededRandom(seed: Array(vector.seed.utf8)))
        #expect(rebuilt.file.bytes.hex == vector.keyFile)

        let (frames, problems) = InboxRecord.scan([UInt8](hex: vector.record))
        #expect(problems.isEmpty)
        let payload = try InboxRecord.open(try #require(frames.first), publicKey: file.publicKey, privateKey: privateKey)
        let bytes = try payload.withUnsafeBytes { Array($0) }
        #expect(bytes.first == 1)
        #expect(Array(bytes[1..<17]).hex == vector.recordID)
    }
}
