import Foundation
import TestSupport
import Testing

@testable import SecureKeys

/// The Argon2id cost a backup header or a recovery key file records is bounded by what the writer uses, and
/// checked before any derivation; and what the mistyped-phrase message says about the alphabet.
@Suite("Recovery key cost bounds and phrase messages")
struct RecoveryCostBoundTests {
    /// `bytes` with the opslimit and memlimit (little-endian u64s after magic, version, KDF and reserved) set,
    /// and the trailing 16-byte checksum over the rest computed again, as an attacker who can write the file would.
    static func withCost(_ bytes: [UInt8], magicLength: Int, opsLimit: UInt64, memLimit: UInt64) -> [UInt8] {
        var patched = bytes
        let offset = magicLength + 1 + 1 + 2
        withUnsafeBytes(of: opsLimit.littleEndian) { patched.replaceSubrange(offset..<offset + 8, with: $0) }
        withUnsafeBytes(of: memLimit.littleEndian) { patched.replaceSubrange(offset + 8..<offset + 16, with: $0) }
        let body = patched[..<(patched.count - ChecksummedFile.checksumLength)]
        patched.replaceSubrange(body.endIndex..., with: KeyDerivation.checksum(of: body, length: ChecksummedFile.checksumLength))
        return patched
    }

    /// Costs libsodium accepts that no writer of a recovery key uses: far more passes, or more memory.
    static let unwrittenCosts: [(UInt64, UInt64)] = [
        (UInt64(UInt32.max), RecoveryKey.defaultKDF.memLimit),
        (RecoveryKey.defaultKDF.opsLimit + 1, RecoveryKey.defaultKDF.memLimit),
        (RecoveryKey.defaultKDF.opsLimit, RecoveryKey.defaultKDF.memLimit * 2),
    ]

    @Test("a backup header whose Argon2id cost is outside what the writer uses (opslimit 2^32-1, checksum recomputed) is backup-damaged, before any derivation")
    func backupHeaderCostIsBounded() throws {
        let (_, recoveryKey) = try RecoveryKey.create(kdf: .minimal)
        let dataKey = try SecureBytes.random(count: BackupHeader.dataKeyLength)
        defer { dataKey.wipe() }
        let header = try BackupHeader.make(recoveryKey: recoveryKey, storeFormat: .current, databaseLength: 4096, dataKey: dataKey)
        #expect(try BackupHeader(bytes: header.bytes, fileLength: header.fileLength).recoveryKey == recoveryKey)
        for (ops, mem) in Self.unwrittenCosts {
            let patched = Self.withCost(header.bytes, magicLength: BackupHeader.magic.count, opsLimit: ops, memLimit: mem)
            let started = ContinuousClock.now
            let error = #expect(throws: SecureKeysError.self) { try BackupHeader(bytes: patched, fileLength: header.fileLength) }
            #expect(error?.code == .backupDamaged, "opslimit \(ops), memlimit \(mem): \(String(describing: error))")
            #expect(error?.message.contains("Argon2id cost") == true, "\(String(describing: error))")
            #expect(ContinuousClock.now - started < .seconds(1), "refused before any derivation")
        }
        // The costs a writer uses are read back.
        for kdf in [PasscodeKDF.minimal, RecoveryKey.defaultKDF] {
            let patched = Self.withCost(header.bytes, magicLength: BackupHeader.magic.count, opsLimit: kdf.opsLimit, memLimit: kdf.memLimit)
            #expect(try BackupHeader(bytes: patched, fileLength: header.fileLength).recoveryKey.kdf == kdf)
        }
    }

    @Test("a recovery key file whose Argon2id cost is outside what the writer uses is refused as damaged, and no recovery key is made with such a cost")
    func recoveryKeyFileCostIsBounded() throws {
        let (_, recoveryKey) = try RecoveryKey.create(kdf: .minimal)
        for (ops, mem) in Self.unwrittenCosts {
            let patched = Self.withCost(recoveryKey.fileBytes, magicLength: RecoveryKey.magic.count, opsLimit: ops, memLimit: mem)
            let error = #expect(throws: SecureKeysError.self) { try RecoveryKey(fileBytes: patched) }
            #expect(error?.message.contains("Argon2id cost") == true, "\(String(describing: error))")
            let made = #expect(throws: SecureKeysError.self) {
                try RecoveryKey(kdf: PasscodeKDF(opsLimit: ops, memLimit: mem), salt: recoveryKey.salt, publicKey: recoveryKey.publicKey)
            }
            #expect(made?.code == .invalidArgument)
        }
    }

    @Test("the mistyped-phrase message leaves out only U, and says I and L are read as 1 and O as 0 (they are accepted)")
    func mistypedMessageNamesTheAlphabet() throws {
        let (phrase, _) = try RecoveryKey.create(kdf: .minimal)
        let text = try phrase.text.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let withU = "U" + text.dropFirst()
        let error = #expect(throws: SecureKeysError.self) { try RecoveryPhrase(typed: SecureBytes(utf8: withU)) }
        #expect(error?.code == .recoveryPhraseMistyped)
        let message = error?.message ?? ""
        #expect(message.contains("except U"), "\(message)")
        #expect(!message.contains("I, L, O"), "I, L and O are not called invalid: \(message)")
        #expect(message.contains("I and L are read as 1, O as 0"), "\(message)")
        // What the message says holds: I, L and O are read as 1, 1 and 0.
        let substituted = String(text.map { $0 == "1" ? "l" : ($0 == "0" ? "O" : $0) })
        let read = try RecoveryPhrase(typed: SecureBytes(utf8: substituted))
        #expect(try read.text.withUnsafeBytes { Array($0) } == phrase.text.withUnsafeBytes { Array($0) })
    }
}
