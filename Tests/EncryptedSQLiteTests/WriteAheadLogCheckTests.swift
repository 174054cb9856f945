import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SecureKeys
import TestSupport
import Testing

@testable import EncryptedSQLite

/// The check of a write-ahead log left by a crash, before SQLite's recovery would cut it short at a damaged
/// frame and drop the transactions committed after it.
@Suite("Write-ahead log check at open")
struct WriteAheadLogCheckTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }
    var path: String { directory.file("store.sqlite") }
    var logPath: String { path + "-wal" }

    static let headerLength = 32
    static let frameLength = 24 + 4096

    /// The database file and its log as a crash leaves them after `count` committed one-row transactions
    /// (copied while the connection is open; its close then checkpoints and removes the log).
    func crashImage(rows count: Int) throws -> (database: [UInt8], log: [UInt8]) {
        let database = try Database(path: path, key: key)
        try database.execute("CREATE TABLE rows(n INTEGER PRIMARY KEY, data BLOB NOT NULL)")
        for n in 0..<count {
            try database.execute("INSERT INTO rows(n, data) VALUES (?, ?)", [.integer(Int64(n)), .blob([UInt8](repeating: UInt8(n), count: 300))])
        }
        let image = (database: bytes(path), log: bytes(logPath))
        database.close()
        return image
    }

    func bytes(_ path: String) -> [UInt8] { FileManager.default.contents(atPath: path).map(Array.init) ?? [] }

    /// Puts the files back as given, without the shared-memory index (a reboot discards it).
    func restore(database: [UInt8], log: [UInt8]) {
        try? FileManager.default.removeItem(atPath: path + "-shm")
        _ = FileManager.default.createFile(atPath: path, contents: Data(database))
        _ = FileManager.default.createFile(atPath: logPath, contents: Data(log))
    }

    func rows(_ configuration: Database.Configuration = Database.Configuration()) throws -> [Int64] {
        let database = try Database(path: path, key: key, configuration: configuration)
        defer { database.close() }
        return try database.fetchValues(Int64.self, "SELECT n FROM rows ORDER BY n")
    }

    func openError(_ configuration: Database.Configuration = Database.Configuration()) -> StoreError? {
        do {
            _ = try Database(path: path, key: key, configuration: configuration)
            return nil
        } catch {
            return error as? StoreError
        }
    }

    /// The byte offset of frame `frame` (1-based).
    func offset(ofFrame frame: Int) -> Int { Self.headerLength + (frame - 1) * Self.frameLength }

    @Test("a log SQLCipher wrote verifies frame by frame: header, salts and chained checksums over the encrypted pages, 4096-byte pages in 4120-byte frames")
    func soundLogVerifies() throws {
        let image = try crashImage(rows: 8)
        #expect(image.log.count > Self.headerLength)
        #expect((image.log.count - Self.headerLength) % Self.frameLength == 0, "frames of 24 + 4096 bytes")
        #expect(Array(image.log[8..<12]) == [0, 0, 0x10, 0], "the log's page size is cipher_page_size")
        restore(database: image.database, log: image.log)
        #expect(try WriteAheadLogCheck(path: logPath, expectedPageSize: 4096).findDamage() == nil)
        #expect(try rows() == Array(0..<8))
    }

    @Test("a flipped byte in an early frame's page fails the open with store-damaged naming the log, the frame and its offset; the files are untouched")
    func flippedPageByteIsDamage() throws {
        var image = try crashImage(rows: 8)
        image.log[offset(ofFrame: 2) + 24 + 2000] ^= 0x01
        restore(database: image.database, log: image.log)

        let error = openError()
        #expect(error?.code == .storeDamaged)
        #expect(error?.path == logPath)
        #expect(error?.message.contains("frame 2 (byte offset \(offset(ofFrame: 2)))") == true, "\(String(describing: error))")
        #expect(bytes(path) == image.database && bytes(logPath) == image.log, "nothing was checkpointed, reset or removed")
    }

    @Test("without the check, SQLite's recovery stops at the damaged frame and drops every later commit, and integrity_check passes: what the check prevents")
    func withoutTheCheckCommitsVanish() throws {
        var image = try crashImage(rows: 8)
        image.log[offset(ofFrame: 2) + 24 + 2000] ^= 0x01
        restore(database: image.database, log: image.log)
        var unchecked = Database.Configuration()
        unchecked.checksWriteAheadLog = false
        let database = try Database(path: path, key: key, configuration: unchecked)
        defer { database.close() }
        #expect(try database.integrityCheck() == ["ok"])
        let count = try database.scalar("SELECT count(*) FROM sqlite_master WHERE name = 'rows'")?.int64
        #expect(count == 0, "the table, committed in frame 2's transaction, is gone")
    }

    @Test("a flipped byte in a frame header — page number, commit size, salt, stored checksum — is damage too")
    func flippedFrameHeaderByteIsDamage() throws {
        for field in [1, 6, 9, 14, 17, 23] {
            var image = try crashImage(rows: 8)
            image.log[offset(ofFrame: 3) + field] ^= 0x40
            restore(database: image.database, log: image.log)
            let error = openError()
            #expect(error?.code == .storeDamaged, "frame header byte \(field)")
            #expect(error?.message.contains("frame 3") == true, "frame header byte \(field): \(String(describing: error))")
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.removeItem(atPath: logPath)
        }
    }

    @Test("a damaged log header, which makes SQLite ignore the whole log, is damage when later commits verify after it")
    func damagedLogHeaderIsDamage() throws {
        for field in [3, 7, 10, 13, 18, 22, 26, 30] {  // magic, version, page size, sequence, salts, checksum
            var image = try crashImage(rows: 8)
            image.log[field] ^= 0x01
            restore(database: image.database, log: image.log)
            let error = openError()
            #expect(error?.code == .storeDamaged, "log header byte \(field)")
            #expect(error?.message.contains("log header") == true, "log header byte \(field): \(String(describing: error))")
            try FileManager.default.removeItem(atPath: path)
            try FileManager.default.removeItem(atPath: logPath)
        }
    }

    @Test("a last frame cut short is a torn write: the store opens with every commit before it")
    func truncatedLastFrameIsTorn() throws {
        let image = try crashImage(rows: 8)
        restore(database: image.database, log: Array(image.log.dropLast(1000)))
        #expect(try rows() == Array(0..<7))
    }

    @Test("damage in the last transaction's frames cannot be told from a torn write: the store opens without it (the documented limit)")
    func damageInLastTransactionIsTakenForTorn() throws {
        var image = try crashImage(rows: 8)
        let frames = (image.log.count - Self.headerLength) / Self.frameLength
        image.log[offset(ofFrame: frames) + 24 + 10] ^= 0x01
        restore(database: image.database, log: image.log)
        #expect(try rows() == Array(0..<7))
    }

    @Test("the check is skipped with synchronous NORMAL, where a power cut may tear several unsynced commits")
    func normalIsNotChecked() throws {
        var image = try crashImage(rows: 8)
        image.log[offset(ofFrame: 2) + 24 + 2000] ^= 0x01
        restore(database: image.database, log: image.log)
        var normal = Database.Configuration()
        normal.synchronous = .normal
        #expect(openError(normal) == nil)
    }

    @Test("a log another connection of this process has open is live, and not checked")
    func liveLogIsNotChecked() throws {
        let image = try crashImage(rows: 8)
        restore(database: image.database, log: image.log)
        let first = try Database(path: path, key: key)
        defer { first.close() }
        #expect(try first.scalar("SELECT count(*) FROM rows")?.int64 == 8)
        // Damage the log in place under the open connection, in a frame no open reads (an old version of the
        // table's page): a second connection does not judge a live log, and opens.
        let damaged = offset(ofFrame: 3) + 24 + 2000
        let file = try #require(FileHandle(forUpdatingAtPath: logPath))
        try file.seek(toOffset: UInt64(damaged))
        try file.write(contentsOf: [image.log[damaged] ^ 0x01])
        try file.close()
        let second = try Database(path: path, key: key)
        second.close()
    }

    @Test("a log whose shared-memory index another process holds (its lock on the index's dead man switch byte) is live, and not checked")
    func logOfAnotherProcessIsNotChecked() throws {
        var image = try crashImage(rows: 8)
        image.log[offset(ofFrame: 2) + 24 + 2000] ^= 0x01
        restore(database: image.database, log: image.log)
        #expect(openError()?.code == .storeDamaged, "no one holds the index: the log is checked")
        _ = FileManager.default.createFile(atPath: path + "-shm", contents: Data(), attributes: [.posixPermissions: 0o600])
        // An open-file-description lock conflicts with this process's own record locks, as another process's
        // lock would: SQLite's read lock on the dead man switch byte, held while that process has the log open.
        let descriptor = open(path + "-shm", O_RDWR)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        var lock = flock()
        lock.l_type = Int16(F_RDLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(WriteAheadLogCheck.sharedMemoryDeadManSwitch)
        lock.l_len = 1
        let openFileDescriptionSetLock: Int32 = 37  // F_OFD_SETLK (Linux)
        #expect(fcntl(descriptor, openFileDescriptionSetLock, &lock) == 0)
        #expect(WriteAheadLogCheck.isOpenInAnotherProcess(databaseAt: path))
        #expect(openError()?.code != .storeDamaged, "a live log is not judged")
    }
}
