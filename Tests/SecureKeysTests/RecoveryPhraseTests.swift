import Foundation
import SecureKeys
import TestSupport
import Testing

@Suite("Recovery phrase and recovery key")
struct RecoveryPhraseTests {
    static func text(_ phrase: RecoveryPhrase) throws -> String {
        try phrase.text.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    static func typed(_ text: String) throws -> RecoveryPhrase {
        try RecoveryPhrase(typed: SecureBytes(utf8: text))
    }

    @Test("a phrase is eight groups of four Crockford base32 characters, and reads back to the same key pair")
    func phraseShapeAndRoundTrip() throws {
        let (phrase, key) = try RecoveryKey.create(kdf: .minimal)
        let text = try Self.text(phrase)
        let groups = text.split(separator: "-")
        #expect(groups.count == 8 && groups.allSatisfy { $0.count == 4 }, "\(groups.map(\.count))")
        #expect(text.allSatisfy { "0123456789ABCDEFGHJKMNPQRSTVWXYZ-".contains($0) })
        let again = try Self.typed(text)
        let privateKey = try key.privateKey(for: again)
        defer { privateKey.wipe() }
        #expect(try SealedBox.publicKey(for: privateKey) == key.publicKey)
    }

    @Test("typed in lower case, without hyphens, with spaces, with I, L and O for 1, 1 and 0: the same phrase")
    func lenientReading() throws {
        let (phrase, key) = try RecoveryKey.create(kdf: .minimal)
        let text = try Self.text(phrase)
        var variant = text.lowercased().replacingOccurrences(of: "-", with: " ")
        variant = variant.replacingOccurrences(of: "1", with: "l").replacingOccurrences(of: "0", with: "O")
        let privateKey = try key.privateKey(for: try Self.typed(variant))
        privateKey.wipe()
    }

    @Test("a mistyped phrase is recovery-phrase-mistyped (changed, left out, swapped, foreign character), never a wrong key")
    func mistypedPhrase() throws {
        let (phrase, _) = try RecoveryKey.create(kdf: .minimal)
        let text = Array(try Self.text(phrase))
        let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
        var changed = text
        changed[6] = alphabet[(alphabet.firstIndex(of: text[6])! + 1) % alphabet.count]
        var swapped = text
        if swapped[0] == swapped[1] { swapped[1] = alphabet[(alphabet.firstIndex(of: text[1])! + 3) % alphabet.count] }
        swapped.swapAt(0, 1)
        var omitted = text
        omitted.remove(at: 10)
        var foreign = text
        foreign[2] = "U"
        for (name, attempt) in [("changed", changed), ("swapped", swapped), ("left out", omitted), ("U", foreign)] {
            #expect(throws: SecureKeysError.self, "\(name)") {
                do {
                    _ = try Self.typed(String(attempt))
                } catch let error as SecureKeysError {
                    #expect(error.code == .recoveryPhraseMistyped, "\(name): \(error)")
                    #expect(!error.message.contains(String(text[0..<4])), "the message does not repeat the phrase")
                    throw error
                }
            }
        }
    }

    @Test("another well-formed phrase is wrong-recovery-phrase")
    func wrongPhrase() throws {
        let (_, key) = try RecoveryKey.create(kdf: .minimal)
        let other = try RecoveryPhrase.generate()
        do {
            _ = try key.privateKey(for: other)
            Issue.record("another phrase derived the key")
        } catch let error as SecureKeysError {
            #expect(error.code == .wrongRecoveryPhrase)
        }
    }

    @Test("the recovery key file round-trips, and a flipped byte or another version is refused")
    func recoveryKeyFile() throws {
        let (_, key) = try RecoveryKey.create(kdf: .minimal)
        let bytes = key.fileBytes
        #expect(bytes.count == RecoveryKey.fileLength)
        #expect(try RecoveryKey(fileBytes: bytes) == key)
        var flipped = bytes
        flipped[50] ^= 1
        #expect(throws: SecureKeysError.self) { try RecoveryKey(fileBytes: flipped) }
        var newer = bytes
        newer[4] = 2
        do {
            _ = try RecoveryKey(fileBytes: newer)
            Issue.record("a version-2 file was read")
        } catch let error as SecureKeysError {
            #expect(error.code == .unsupportedBackupFormat)
        }
    }

    @Test("a backup header round-trips, and its data key opens only with the phrase's private key")
    func backupHeader() throws {
        let (phrase, key) = try RecoveryKey.create(kdf: .minimal)
        let dataKey = try SecureBytes.random(count: 32)
        let header = try BackupHeader.make(recoveryKey: key, storeFormat: .current, databaseLength: 4096, dataKey: dataKey)
        #expect(header.bytes.count == BackupHeader.length)
        let parsed = try BackupHeader(bytes: header.bytes, fileLength: header.fileLength)
        #expect(parsed.recoveryKey == key && parsed.databaseLength == 4096 && parsed.storeFormat == .current)
        let privateKey = try key.privateKey(for: phrase)
        defer { privateKey.wipe() }
        let opened = try parsed.openDataKey(privateKey: privateKey)
        #expect(opened.constantTimeEquals(dataKey))
        do {
            _ = try BackupHeader(bytes: header.bytes, fileLength: header.fileLength - 1)
            Issue.record("a file one byte short was accepted")
        } catch let error as SecureKeysError {
            #expect(error.code == .backupDamaged && error.message.contains("truncated"))
        }
    }
}
