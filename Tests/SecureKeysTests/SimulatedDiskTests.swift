import TestSupport
import Foundation
import Testing

@testable import DiskModel
@testable import SecureKeys

#if canImport(Glibc)
import Glibc
#endif

/// The disk model itself: what a power cut keeps, by mode, of data and of folder entries.
@Suite("Simulated disk")
struct SimulatedDiskTests {
    /// A covered folder and a disk over it, released together.
    final class Fixture {
        let directory = TemporaryDirectory()
        let disk: SimulatedDisk
        var root: String { directory.path }
        /// The disk's file system, which the tests write through.
        var fileSystem: FileSystem { .simulated(disk) }

        init() { disk = SimulatedDisk(root: directory.path) }
        deinit { disk.stopModelling() }

        func contents(_ name: String) -> [UInt8]? {
            FileManager.default.contents(atPath: root + "/" + name).map(Array.init)
        }

        @discardableResult
        func cut(_ mode: SimulatedDisk.PowerCutMode, seed: UInt64 = 1) throws -> SimulatedDisk.PowerCutReport {
            var random = SplitMix64(seed: seed)
            return try disk.powerCut(mode, random: &random)
        }
    }

    @Test("a synced file whose folder was synced survives a cut; data written after the last fsync is lost")
    func dropLosesUnsyncedData() throws {
        let fixture = Fixture()
        let path = fixture.root + "/log"
        let file = try DiskIO.open(path, flags: O_WRONLY | O_CREAT | O_APPEND, in: fixture.fileSystem)
        try file.write([1, 2, 3])
        try file.sync()
        try DiskIO.syncDirectory(fixture.root, in: fixture.fileSystem)
        try file.write([4, 5])
        file.close()
        #expect(fixture.contents("log") == [1, 2, 3, 4, 5], "the running system sees every write")
        let report = try fixture.cut(.drop)
        #expect(fixture.contents("log") == [1, 2, 3])
        #expect(report.unsyncedPieces == 1 && report.droppedPieces == 1)
    }

    @Test("a cut leaves lock files alone: the one there before the model and one made after keep their inode, bytes and flock")
    func lockFilesAreLeftAlone() throws {
        for mode in SimulatedDisk.PowerCutMode.allCases {
            let directory = TemporaryDirectory()
            let before = open(directory.path + "/owner.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            #expect(before >= 0 && flock(before, LOCK_EX | LOCK_NB) == 0 && write(before, "12\n", 3) == 3)
            defer { close(before) }
            let disk = SimulatedDisk(root: directory.path)
            defer { disk.stopModelling() }
            try SecureFile.createDirectory(at: directory.path + "/device", in: .simulated(disk))
            let after = open(directory.path + "/device/agent.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            #expect(after >= 0 && write(after, "34\n", 3) == 3)
            defer { close(after) }
            func inode(_ name: String) -> ino_t? {
                var info = stat()
                return lstat(directory.path + "/" + name, &info) == 0 ? info.st_ino : nil
            }
            let inodes = (inode("owner.lock"), inode("device/agent.lock"))
            var random = SplitMix64(seed: 3)
            try disk.powerCut(mode, random: &random)
            #expect(inode("owner.lock") == inodes.0 && inode("device/agent.lock") == inodes.1, "\(mode)")
            #expect(FileManager.default.contents(atPath: directory.path + "/owner.lock") == Data("12\n".utf8))
            // Still held: a new open file description cannot take it.
            let probe = open(directory.path + "/owner.lock", O_RDONLY | O_CLOEXEC)
            #expect(flock(probe, LOCK_EX | LOCK_NB) != 0, "\(mode): the lock was lost")
            close(probe)
        }
    }

    @Test("a cut leaves a symbolic link and a FIFO where they are (damage put in place of a file), and the file moved aside keeps its synced bytes")
    func linksAndFIFOsAreLeftAlone() throws {
        for mode in SimulatedDisk.PowerCutMode.allCases {
            let fixture = Fixture()
            let file = try DiskIO.open(fixture.root + "/store", flags: O_WRONLY | O_CREAT, in: fixture.fileSystem)
            try file.write([7, 8, 9])
            try file.sync()
            file.close()
            try DiskIO.rename(fixture.root + "/store", to: fixture.root + "/store.aside", in: fixture.fileSystem)
            #expect(symlink(fixture.root + "/store.aside", fixture.root + "/store") == 0)
            #expect(mkfifo(fixture.root + "/store-wal", 0o600) == 0)
            try DiskIO.syncDirectory(fixture.root, in: fixture.fileSystem)
            try fixture.cut(mode)
            var info = stat()
            #expect(lstat(fixture.root + "/store", &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "\(mode): the link is gone")
            #expect(lstat(fixture.root + "/store-wal", &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "\(mode): the FIFO is gone")
            #expect(fixture.contents("store.aside") == [7, 8, 9], "\(mode)")
        }
    }

    @Test("a file created and synced, but whose folder was not synced, is gone after a cut")
    func unsyncedEntryIsLost() throws {
        let fixture = Fixture()
        let file = try DiskIO.open(fixture.root + "/new", flags: O_WRONLY | O_CREAT | O_EXCL, in: fixture.fileSystem)
        try file.write(Array("data".utf8))
        try file.sync()
        file.close()
        try fixture.cut(.drop)
        #expect(fixture.contents("new") == nil)
    }

    @Test("an atomic write (temporary, fsync, rename, folder fsync) survives a cut in every mode")
    func atomicWriteSurvives() throws {
        for mode in SimulatedDisk.PowerCutMode.allCases {
            for seed: UInt64 in 1...8 {
                let fixture = Fixture()
                try SecureFile.writeAtomically([7, 7, 7], to: fixture.root + "/key", replacing: false, in: fixture.fileSystem)
                try SecureFile.writeAtomically([9, 9], to: fixture.root + "/key", replacing: true, in: fixture.fileSystem)
                try fixture.cut(mode, seed: seed)
                #expect(fixture.contents("key") == [9, 9], "\(mode) seed \(seed)")
                #expect(try FileManager.default.contentsOfDirectory(atPath: fixture.root) == ["key"], "no temporary left")
            }
        }
    }

    @Test("a removal whose folder was not synced is undone by a cut; a synced one is not")
    func unsyncedRemovalComesBack() throws {
        let fixture = Fixture()
        try SecureFile.writeAtomically([1], to: fixture.root + "/kept", replacing: false, in: fixture.fileSystem)
        try SecureFile.writeAtomically([2], to: fixture.root + "/gone", replacing: false, in: fixture.fileSystem)
        try DiskIO.unlink(fixture.root + "/kept", in: fixture.fileSystem)
        try DiskIO.unlink(fixture.root + "/gone", in: fixture.fileSystem)
        try DiskIO.syncDirectory(fixture.root, in: fixture.fileSystem)
        try SecureFile.writeAtomically([3], to: fixture.root + "/third", replacing: false, in: fixture.fileSystem)
        try DiskIO.unlink(fixture.root + "/third", in: fixture.fileSystem)
        try fixture.cut(.drop)
        #expect(fixture.contents("kept") == nil)
        #expect(fixture.contents("gone") == nil)
        #expect(fixture.contents("third") == [3], "the removal was never made durable")
    }

    @Test("a folder made but not synced into its parent is lost with everything in it; createDirectory syncs the parent")
    func unsyncedFolderIsLost() throws {
        let fixture = Fixture()
        try DiskIO.makeDirectory(fixture.root + "/raw", in: fixture.fileSystem)
        try SecureFile.writeAtomically([1], to: fixture.root + "/raw/key", replacing: false, in: fixture.fileSystem)
        try fixture.cut(.drop)
        #expect(fixture.contents("raw/key") == nil, "its own folder was synced, but not the folder's entry in the parent")
        #expect(!FileManager.default.fileExists(atPath: fixture.root + "/raw"))

        try SecureFile.createDirectory(at: fixture.root + "/made/deeper", in: fixture.fileSystem)
        try SecureFile.writeAtomically([2], to: fixture.root + "/made/deeper/key", replacing: false, in: fixture.fileSystem)
        try fixture.cut(.drop)
        #expect(fixture.contents("made/deeper/key") == [2])
    }

    @Test("torn-sequence keeps a prefix of the unsynced sectors; torn-op any subset, each sector whole")
    func tornModes() throws {
        let old = [UInt8](repeating: 0xAA, count: 4 * 512)
        let new = [UInt8](repeating: 0xBB, count: 4 * 512)
        var sawPartial = (sequence: false, op: false)
        for mode in [SimulatedDisk.PowerCutMode.tornSequence, .tornOp] {
            for seed: UInt64 in 1...24 {
                let fixture = Fixture()
                let file = try DiskIO.open(fixture.root + "/data", flags: O_RDWR | O_CREAT, in: fixture.fileSystem)
                try file.write(old)
                try file.sync()
                try DiskIO.syncDirectory(fixture.root, in: fixture.fileSystem)
                _ = lseek(file.descriptor, 0, SEEK_SET)
                try file.write(new)
                file.close()
                try fixture.cut(mode, seed: seed)
                let kept = try #require(fixture.contents("data"))
                #expect(kept.count == old.count)
                let sectors = (0..<4).map { Array(kept[($0 * 512)..<(($0 + 1) * 512)]) }
                for sector in sectors { #expect(sector == Array(old[..<512]) || sector == Array(new[..<512]), "a sector is never split") }
                let isNew = sectors.map { $0 == Array(new[..<512]) }
                if mode == .tornSequence {
                    #expect(isNew == isNew.sorted(by: { $0 && !$1 }), "a prefix: \(isNew)")
                    if isNew.contains(true) && isNew.contains(false) { sawPartial.sequence = true }
                } else if isNew.contains(true) && isNew.contains(false) {
                    sawPartial.op = true
                }
            }
        }
        #expect(sawPartial.sequence && sawPartial.op, "24 seeds tear a write at least once in each mode")
    }

    @Test("a handle opened before a cut is dead after it: writing through it fails")
    func handlesDieAtACut() throws {
        let fixture = Fixture()
        let file = try DiskIO.open(fixture.root + "/data", flags: O_WRONLY | O_CREAT, in: fixture.fileSystem)
        try fixture.cut(.drop)
        #expect(throws: SecureKeysError.self) { try file.write([1]) }
        #expect(throws: SecureKeysError.self) { try file.sync() }
        file.close()
    }

    @Test("a planted missing fsync is skipped only for its purpose")
    func plantedFaults() throws {
        let fixture = Fixture()
        fixture.disk.plantedFault = .missingInboxFsync
        let file = try DiskIO.open(fixture.root + "/inbox", flags: O_WRONLY | O_CREAT | O_APPEND, in: fixture.fileSystem)
        try DiskIO.syncDirectory(fixture.root, in: fixture.fileSystem)
        try file.write([1])
        try file.sync(purpose: .inboxAppend)
        file.close()
        try fixture.cut(.drop)
        #expect(fixture.contents("inbox") == [], "the append was never synced")

        fixture.disk.plantedFault = .missingDirectoryFsync
        try SecureFile.writeAtomically([5], to: fixture.root + "/key", replacing: false, in: fixture.fileSystem)
        try fixture.cut(.drop)
        #expect(fixture.contents("key") == nil, "the new key's folder was never synced")
        try SecureFile.writeAtomically([6], to: fixture.root + "/state", replacing: true, in: fixture.fileSystem)
        try fixture.cut(.drop)
        #expect(fixture.contents("state") == [6], "a replacement still syncs its folder")
    }

    @Test("outside its disk's folder a simulated file system is the plain system call and nothing is recorded")
    func uncoveredIsPlain() throws {
        let fixture = Fixture()
        let elsewhere = TemporaryDirectory()
        #expect(fixture.fileSystem.disk(covering: elsewhere.path + "/x") == nil)
        #expect(fixture.fileSystem.disk(covering: fixture.root + "/x") === fixture.disk)
        #expect(fixture.fileSystem.disk(covering: fixture.root + "x") == nil, "a sibling with the same prefix is not covered")
        try SecureFile.writeAtomically([1], to: elsewhere.path + "/key", replacing: false, in: fixture.fileSystem)
        #expect(fixture.disk.unsyncedChanges.pieces == 0 && fixture.disk.unsyncedChanges.entryChanges == 0)
    }
}
