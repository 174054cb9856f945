import Foundation
import SecureKeys
import TestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@_spi(Testing) @testable import ProtectedStore

/// Store files that are not what they should be (DESIGN.md, invariant 11): a store file emptied or cut shorter
/// than its first page, a symbolic link in its place, a FIFO in place of its write-ahead log or shared-memory
/// index. Each is refused and reported, left as it is, and never taken for a new, empty store.
@Suite("Store files that are not what they seem", .timeLimit(.minutes(3)))
@MainActor
struct StoreFileKindTests {
    /// A store holding k=v, its app ended cleanly (its log checkpointed and removed).
    func storeHoldingValue() async throws -> ControllerFixture {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.controller.coordinator?.put("k", "v")
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        return fixture
    }

    func relaunch(_ fixture: ControllerFixture) async {
        fixture.controller = fixture.makeController()
        await fixture.launch()
    }

    /// The error the attach failed with, or `nil` (recorded as an issue) when it did not fail.
    func attachError(_ fixture: ControllerFixture, _ what: String) -> StoreError? {
        guard case .failed(let error) = fixture.controller.phase else {
            Issue.record("\(what): the store did not fail to attach: \(fixture.controller.phase)")
            return nil
        }
        return error
    }

    func isLink(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFLNK
    }

    func isFIFO(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO
    }

    @Test(
        "a store file cut to 0 or 1 byte, or shorter than its first page, beside its key file fails the attach with store-damaged naming the file, and is left byte for byte as it was",
        arguments: [0, 1, 100, 4095])
    func cutStoreFileIsDamaged(length: Int) async throws {
        let fixture = try await storeHoldingValue()
        let cut = Array(fileBytes(fixture.storePath).prefix(length))
        #expect(truncate(fixture.storePath, off_t(length)) == 0)

        await relaunch(fixture)
        guard let error = attachError(fixture, "\(length) bytes") else { return }
        #expect(error.code == .storeDamaged, "\(error)")
        #expect(error.detail.contains(fixture.storePath), "\(error)")
        #expect(fixture.presented.map(\.code) == [.storeDamaged])
        #expect(fixture.controller.coordinator == nil)
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        #expect(fileBytes(fixture.storePath) == cut, "no fresh header was written into the cut file")
        #expect(!FileManager.default.fileExists(atPath: fixture.storePath + "-wal"), "no log was started beside it")
    }

    @Test("an export of a store file cut to 0 bytes fails with store-damaged and writes nothing")
    func exportOfEmptiedStoreIsRefused() async throws {
        let fixture = try await storeHoldingValue()
        #expect(truncate(fixture.storePath, 0) == 0)
        let elsewhere = TemporaryDirectory()  // an export is never written into the state directory
        let destination = elsewhere.file("copy.sqlite")
        let error = await #expect(throws: StoreError.self) {
            try await StoreCoordinator.export(
                .init(path: fixture.storePath), keys: fixture.device, to: destination, encryption: .plaintext)
        }
        #expect(error?.code == .storeDamaged, "\(String(describing: error))")
        #expect(!FileManager.default.fileExists(atPath: destination))
        #expect(fileBytes(fixture.storePath).isEmpty)
    }

    @Test("a store file its interrupted creation left empty (its marker beside it) is built again, not refused")
    func emptyStoreOfAnInterruptedCreationIsCreated() async throws {
        let fixture = try ControllerFixture()
        let files = try fixture.interruptCreationAfterTheKey()
        #expect(FileManager.default.fileExists(atPath: files.creationMarker))
        #expect(FileManager.default.createFile(atPath: fixture.storePath, contents: Data()))
        await fixture.launch()
        #expect(fixture.controller.phase == .ready)
        #expect(fixture.presented.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: files.creationMarker))
        #expect(!FileManager.default.fileExists(atPath: files.unfinished), "an empty file holds nothing to move aside")
        try await fixture.controller.coordinator?.put("k", "v")
        #expect(try await fixture.value("k") == "v")
    }

    @Test("a symbolic link at the store file's path fails the attach with io-error naming it; the link and its target are left as they are")
    func linkAtStorePathIsRefused() async throws {
        let fixture = try await storeHoldingValue()
        let target = fixture.directory.file("elsewhere.sqlite")
        try FileManager.default.moveItem(atPath: fixture.storePath, toPath: target)
        #expect(symlink(target, fixture.storePath) == 0)
        let before = fileBytes(target)

        await relaunch(fixture)
        guard let error = attachError(fixture, "a link") else { return }
        #expect(error.code == .ioError, "\(error)")
        #expect(error.detail.contains(fixture.storePath) && error.message.contains("symbolic link"), "\(error)")
        #expect(fixture.presented.map(\.code) == [.ioError])
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        #expect(isLink(fixture.storePath))
        #expect(fileBytes(target) == before)
        #expect(!FileManager.default.fileExists(atPath: target + "-wal"), "no log beside the link's target")
    }

    @Test(
        "a FIFO at the store's write-ahead log, shared-memory index or rollback journal fails the attach with io-error naming it, at once (never opened, so nothing blocks); the FIFO is left",
        arguments: ["-wal", "-shm", "-journal"])
    func fifoBesideStoreIsRefused(suffix: String) async throws {
        let fixture = try await storeHoldingValue()
        let fifo = fixture.storePath + suffix
        #expect(mkfifo(fifo, 0o600) == 0)

        await relaunch(fixture)
        guard let error = attachError(fixture, "a FIFO at \(suffix)") else { return }
        #expect(error.code == .ioError, "\(error)")
        #expect(error.detail.contains(fifo) && error.message.contains("FIFO"), "\(error)")
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        #expect(isFIFO(fifo))

        // With the FIFO gone, the store attaches with its value.
        try FileManager.default.removeItem(atPath: fifo)
        await relaunch(fixture)
        #expect(fixture.controller.phase == .ready)
        #expect(try await fixture.value("k") == "v")
    }
}
