import TestSupport
import Foundation
import Testing

@testable import SecureKeys

@Suite("Store key file")
struct StoreKeyFileTests {
    let classKey: SecureBytes

    init() throws {
        classKey = try SecureBytes.random(count: 32)
    }

    /// The code of the `SecureKeysError` that `body` throws, `nil` when it throws none (another error fails the test).
    func code(of body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> SecureKeysError.Code? {
        thrownError(SecureKeysError.self, sourceLocation: sourceLocation, by: body)?.code
    }

    @Test("a created key file unwraps to the same store key with its class key")
    func createAndUnwrap() throws {
        let directory = TemporaryDirectory()
        let keyPath = directory.file("store.key")
        let storeKey = try StoreKeyFile.create(
            at: keyPath, forStoreAt: directory.file("store.sqlite"), protectionClass: .complete, classKey: classKey)
        let file = try StoreKeyFile.load(from: keyPath)
        #expect(file.protectionClass == .complete)
        #expect(try file.unwrap(with: classKey).constantTimeEquals(storeKey))
        let attributes = try FileManager.default.attributesOfItem(atPath: keyPath)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let key = try storeKey.withUnsafeBytes { Array($0) }
        #expect(!file.bytes.hex.contains(key.hex))
    }

    @Test("an existing store without a key file is never given a new key")
    func refusesToOrphanExistingStore() throws {
        let directory = TemporaryDirectory()
        let storePath = directory.file("store.sqlite")
        let data = Data("existing user data".utf8)
        _ = FileManager.default.createFile(atPath: storePath, contents: data)
        #expect(code {
            _ = try StoreKeyFile.create(
                at: directory.file("store.key"), forStoreAt: storePath, protectionClass: .complete, classKey: classKey)
        } == .storeExistsWithoutKey)
        #expect(!FileManager.default.fileExists(atPath: directory.file("store.key")))
        #expect(FileManager.default.contents(atPath: storePath) == data)

        _ = FileManager.default.createFile(atPath: directory.file("other.sqlite-wal"), contents: data)
        #expect(code {
            _ = try StoreKeyFile.create(
                at: directory.file("other.key"), forStoreAt: directory.file("other.sqlite"), protectionClass: .complete,
                classKey: classKey)
        } == .storeExistsWithoutKey)
    }

    @Test("an existing key file is never overwritten")
    func neverOverwritesKeyFile() throws {
        let directory = TemporaryDirectory()
        let keyPath = directory.file("store.key")
        _ = try StoreKeyFile.create(
            at: keyPath, forStoreAt: directory.file("a.sqlite"), protectionClass: .complete, classKey: classKey)
        let before = try SecureFile.read(keyPath)
        #expect(code {
            _ = try StoreKeyFile.create(
                at: keyPath, forStoreAt: directory.file("b.sqlite"), protectionClass: .complete, classKey: classKey)
        } == .alreadyExists)
        #expect(try SecureFile.read(keyPath) == before)
    }

    @Test("truncated or bit-flipped key files are damaged; another class key gives wrong-device")
    func damagedAndForeignKeyFiles() throws {
        let (file, _) = try StoreKeyFile.make(protectionClass: .completeUntilFirstUserAuthentication, classKey: classKey)
        for length in 0..<file.bytes.count {
            #expect(code { _ = try StoreKeyFile(bytes: Array(file.bytes[..<length])) } == .keyFileDamaged, "length \(length)")
        }
        for index in file.bytes.indices where index != 4 {
            var flipped = file.bytes
            flipped[index] ^= 0x10
            #expect(code { _ = try StoreKeyFile(bytes: flipped) } == .keyFileDamaged, "byte \(index)")
        }
        #expect(code { _ = try file.unwrap(with: try SecureBytes.random(count: 32)) } == .wrongDevice)
    }

    @Test("a new key file is version 2 and records its store's format (format 1) at offset 6")
    func newKeyFileRecordsStoreFormat() throws {
        let (file, _) = try StoreKeyFile.make(protectionClass: .complete, classKey: classKey)
        #expect(file.bytes[4] == 2 && file.bytes[6] == StoreFormat.sqlcipher3Raw4096.identifier)
        #expect(try StoreKeyFile(bytes: file.bytes).storeFormat == .sqlcipher3Raw4096)
    }

    @Test("a key file recording a store format this build does not know is unsupported-key-format, naming the format")
    func unknownStoreFormatIsUnsupported() throws {
        let (file, _) = try StoreKeyFile.make(protectionClass: .complete, classKey: classKey)
        var writer = ByteWriter()
        var bytes = Array(file.bytes[..<(file.bytes.count - ChecksummedFile.checksumLength)])
        bytes[6] = 9
        writer.write(bytes)
        ChecksummedFile.seal(&writer)
        let error = #expect(throws: SecureKeysError.self) { _ = try StoreKeyFile(bytes: writer.bytes, path: "/tmp/x.key") }
        #expect(error?.code == .unsupportedKeyFormat)
        #expect(error?.message.contains("format 9") == true, "\(String(describing: error))")
        #expect(error?.message.contains("1 (sqlcipher3-raw-4096)") == true, "names the formats it knows")
    }

    @Test("recording another format: the same store key, identifier and class, format 2 at offset 6, a new wrap; another class key is wrong-device")
    func recordingAnotherFormat() throws {
        let (file, storeKey) = try StoreKeyFile.make(protectionClass: .completeUntilFirstUserAuthentication, classKey: classKey)
        let recorded = try file.recording(.sqlcipher4Raw4096, classKey: classKey)
        #expect(recorded.bytes[4] == 2 && recorded.bytes[6] == 2)
        #expect(recorded.storeFormat == .sqlcipher4Raw4096 && recorded.storeID == file.storeID)
        #expect(recorded.protectionClass == .completeUntilFirstUserAuthentication)
        #expect(Array(recorded.bytes[24..<96]) != Array(file.bytes[24..<96]), "wrapped again")
        #expect(try recorded.unwrap(with: classKey).constantTimeEquals(storeKey))
        #expect(try StoreKeyFile(bytes: recorded.bytes).storeFormat == .sqlcipher4Raw4096, "it parses back")
        #expect(code { _ = try file.recording(.sqlcipher4Raw4096, classKey: try SecureBytes.random(count: 32)) } == .wrongDevice)
        #expect(code { _ = try file.recording(StoreFormat(sqlcipher3PageSize: 1024), classKey: self.classKey) } == .unsupportedKeyFormat)
    }
}
