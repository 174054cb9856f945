import TestSupport
import EncryptedSQLite
import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// `keys/vectors/backup-v1.json` and `backup-v1.backup`: the recovery phrase and recovery key file, rebuilt
/// byte for byte from their seed, and a backup file (format v1) made with them, opened with the phrase and
/// read field by field at the offsets keys/README.md documents. A sealed box draws its ephemeral key from
/// libsodium itself, so the backup file cannot be rebuilt byte for byte: it is opened and read instead.
/// `PROTECTEDSTORE_RECORD_VECTORS=1` writes them again after a deliberate format change.
@Suite("Backup known-answer vector", .serialized)
struct BackupVectorTests {
    struct Vector: Codable {
        var description: String
        var seed: String
        var opsLimit: UInt64
        var memLimit: UInt64
        var phrase: String
        var recoveryKeyFile: String
        var backupFile: String
        var entries: [String: String]
    }

    static let vectors = SQLCipher4Oracle.packageRoot + "/keys/vectors"
    static let recording = ProcessInfo.processInfo.environment["PROTECTEDSTORE_RECORD_VECTORS"] == "1"
    static let entries = ["alpha": "first", "beta": "naïve café ☕", "gamma": String(repeating: "long ", count: 2000)]

    static func makeKey(seed: String) throws -> (RecoveryPhrase, RecoveryKey) {
        try RecoveryKey.create(kdf: .minimal, random: SeededRandom(seed: Array(seed.utf8)))
    }

    static func record() async throws {
        let seed = "backup-v1"
        let (phrase, key) = try makeKey(seed: seed)
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        try fixture.unlock()
        let backupPath = vectors + "/backup-v1.backup"
        try? FileManager.default.removeItem(atPath: backupPath)
        try await fixture.withStore { coordinator in
            for (name, value) in entries.sorted(by: { $0.key < $1.key }) { try await coordinator.put(name, value) }
            _ = try await coordinator.backup(to: backupPath, recoveryKey: key)
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: backupPath)
        let vector = Vector(
            description: "Backup file format v1 and recovery key file v1. TEST-ONLY recovery phrase: never use it for real data.",
            seed: seed, opsLimit: key.kdf.opsLimit, memLimit: key.kdf.memLimit,
            phrase: try phrase.text.withUnsafeBytes { String(decoding: $0, as: UTF8.self) },
            recoveryKeyFile: key.fileBytes.hex, backupFile: "backup-v1.backup", entries: entries)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try (encoder.encode(vector) + Data("\n".utf8)).write(to: URL(fileURLWithPath: vectors + "/backup-v1.json"))
    }

    @Test("the recovery phrase and key file rebuild byte for byte; the backup opens with the phrase and reads at the documented offsets")
    func vector() async throws {
        if Self.recording { try await Self.record() }
        let vector = try JSONDecoder().decode(Vector.self, from: Data(contentsOf: URL(fileURLWithPath: Self.vectors + "/backup-v1.json")))
        let (phrase, key) = try Self.makeKey(seed: vector.seed)
        #expect(try phrase.text.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } == vector.phrase)
        #expect(key.fileBytes.hex == vector.recoveryKeyFile)
        let file = [UInt8](hex: vector.recoveryKeyFile)
        #expect(Array(file[0..<4]) == Array("PSRK".utf8) && file[4] == 1 && file[5] == 2)
        #expect(Array(file[40..<72]) == key.publicKey)

        // The backup, read at the documented offsets.
        let backupPath = Self.vectors + "/" + vector.backupFile
        let bytes = try #require(FileManager.default.contents(atPath: backupPath)).map { $0 }
        func u64(_ offset: Int) -> UInt64 { bytes[offset..<offset + 8].reversed().reduce(0) { $0 << 8 | UInt64($1) } }
        #expect(Array(bytes[0..<4]) == Array("PSBK".utf8))
        #expect(bytes[4] == 1, "format version")
        #expect(bytes[5] == 2, "Argon2id")
        #expect(u64(8) == vector.opsLimit && u64(16) == vector.memLimit)
        #expect(Array(bytes[24..<40]) == key.salt)
        #expect(Array(bytes[40..<72]) == key.publicKey)
        #expect(bytes[72] == 1, "store format 1")
        #expect(u64(80) == UInt64(bytes.count - 184 - 32), "the database's length")
        #expect(Array(bytes[184..<200]) != Array("SQLite format 3\0".utf8), "the database is encrypted")

        // Opened with the vector's phrase, as the user types it.
        let copy = TemporaryDirectory()
        let backupCopy = copy.file("copy.backup")
        try Data(bytes).write(to: URL(fileURLWithPath: backupCopy))
        let target = try NewDevice()
        _ = try await target.restore(backupCopy, phrase: try RecoveryPhrase(typed: SecureBytes(utf8: vector.phrase.lowercased())))
        let coordinator = try await StoreCoordinator.attach(target.configuration, keys: target.device)
        let restored = try await coordinator.allEntries()
        await coordinator.close()
        #expect(Dictionary(uniqueKeysWithValues: restored.map { ($0.key, $0.value) }) == vector.entries)
    }
}
