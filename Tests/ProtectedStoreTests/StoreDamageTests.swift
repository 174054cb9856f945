import Foundation
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// Damage to the store's files found at attach: reported as `store-damaged`, every file left as it is — never
/// silently dropped, never taken for a failed migration.
@Suite("Store damage at attach", .timeLimit(.minutes(3)))
@MainActor
struct StoreDamageTests {
    /// SQLite's WAL header and frame header lengths; a frame is its header and one 4096-byte page.
    static let walHeaderLength = 32
    static let frameLength = 24 + 4096

    /// The store's database file and its write-ahead log as a crash leaves them: `count` values put, each
    /// acknowledged (committed with `synchronous = FULL`), nothing checkpointed. The files are copied while the
    /// store is open, then put back after the app ended (whose close checkpointed and removed the log).
    func crashImage(_ fixture: ControllerFixture, puts count: Int) async throws -> (database: [UInt8], log: [UInt8]) {
        await fixture.launch()
        for index in 0..<count {
            try await fixture.controller.coordinator?.put("k\(index)", "value \(index)")
        }
        let image = (database: fileBytes(fixture.storePath), log: fileBytes(fixture.storePath + "-wal"))
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        #expect(image.log.count >= Self.walHeaderLength + 4 * Self.frameLength, "the log holds the commits")
        return image
    }

    /// Writes the store's files as given, without the shared-memory index (a crash's reboot discards it).
    func restore(_ fixture: ControllerFixture, database: [UInt8], log: [UInt8]) {
        try? FileManager.default.removeItem(atPath: fixture.storePath + "-shm")
        _ = FileManager.default.createFile(atPath: fixture.storePath, contents: Data(database))
        _ = FileManager.default.createFile(atPath: fixture.storePath + "-wal", contents: Data(log))
    }

    /// Whether the file at `path` holds exactly `bytes` (a Bool: a failed comparison of two large arrays
    /// would print their whole difference).
    func same(_ path: String, _ bytes: [UInt8]) -> Bool { fileBytes(path) == bytes }

    func relaunch(_ fixture: ControllerFixture) async {
        fixture.controller = fixture.makeController()
        await fixture.launch()
    }

    @Test("a flipped byte in an early frame of the write-ahead log fails the attach with store-damaged naming the log and the frame; every file is left as it is")
    func flippedByteInEarlyLogFrame() async throws {
        let fixture = try ControllerFixture()
        var image = try await crashImage(fixture, puts: 6)
        let offset = Self.walHeaderLength + Self.frameLength + 24 + 1000  // inside frame 2's page
        image.log[offset] ^= 0x20
        restore(fixture, database: image.database, log: image.log)

        await relaunch(fixture)
        guard case .failed(let error) = fixture.controller.phase else {
            Issue.record("the store attached over a damaged log, dropping acknowledged commits: \(fixture.controller.phase)")
            return
        }
        #expect(error.code == .storeDamaged)
        #expect(error.path == fixture.storePath + "-wal" && error.detail.contains(fixture.storePath + "-wal"), "\(error)")
        #expect(error.message.contains("frame 2"), "\(error.message)")
        #expect(fixture.presented.map(\.code) == [.storeDamaged])
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        #expect(same(fixture.storePath, image.database), "the store file is untouched")
        #expect(same(fixture.storePath + "-wal", image.log), "the log is untouched: not checkpointed, not reset")
    }

    @Test("a flipped byte in a frame header (its salt, its page number) fails the attach with store-damaged; files untouched")
    func flippedByteInFrameHeader() async throws {
        for field in [8, 2] {  // salt-1, page number
            let fixture = try ControllerFixture()
            var image = try await crashImage(fixture, puts: 6)
            image.log[Self.walHeaderLength + 2 * Self.frameLength + field] ^= 0x01  // frame 3's header
            restore(fixture, database: image.database, log: image.log)

            await relaunch(fixture)
            #expect(fixture.presented.map(\.code) == [.storeDamaged], "header byte \(field)")
            await fixture.controller.terminate()
            await fixture.controller.waitUntilIdle()
            #expect(same(fixture.storePath + "-wal", image.log), "header byte \(field)")
        }
    }

    @Test("a log whose last frame was cut short (a torn write) opens with every commit before it")
    func tornLastFrameIsNormal() async throws {
        let fixture = try ControllerFixture()
        let image = try await crashImage(fixture, puts: 6)
        restore(fixture, database: image.database, log: Array(image.log.dropLast(100)))

        await relaunch(fixture)
        #expect(fixture.controller.phase == .ready)
        #expect(fixture.presented.isEmpty)
        for index in 0..<5 {
            #expect(try await fixture.value("k\(index)") == "value \(index)")
        }
    }

    @Test("a page of the store file that fails its HMAC while migrations read it is store-damaged, naming where it was found, not migration-failed")
    func damagedPageDuringMigrations() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        for index in 0..<20 {
            try await fixture.controller.coordinator?.put("k\(index)", String(repeating: "v", count: 500))
        }
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        var bytes = fileBytes(fixture.storePath)
        #expect(bytes.count >= 3 * 4096)
        bytes[4096 + 100] ^= 0x04  // page 2
        _ = FileManager.default.createFile(atPath: fixture.storePath, contents: Data(bytes))

        await relaunch(fixture)
        guard case .failed(let error) = fixture.controller.phase else {
            Issue.record("the store attached with a damaged page: \(fixture.controller.phase)")
            return
        }
        #expect(error.code == .storeDamaged, "\(error)")
        #expect(error.message.contains("migration"), "\(error.message)")
        #expect(fixture.presented.map(\.code) == [.storeDamaged])
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        #expect(same(fixture.storePath, bytes), "the store file is untouched")
    }
}
