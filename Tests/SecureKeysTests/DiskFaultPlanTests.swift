import TestSupport
import Foundation
import Testing

@testable import DiskModel
@testable import SecureKeys

#if canImport(Glibc)
import Glibc
#endif

/// The fault plan in the DiskIO seam: which call fails, how, and what it leaves.
@Suite("Disk fault plan")
struct DiskFaultPlanTests {
    /// The `errno` of a SecureKeysError `io`, or `nil` for anything else.
    static func errnoOf(_ body: () throws -> Void) -> Int32? {
        do {
            try body()
            return nil
        } catch let error as SecureKeysError where error.code == .ioError {
            return error.systemErrno
        } catch {
            return nil
        }
    }

    func contents(_ path: String) -> [UInt8]? { FileManager.default.contents(atPath: path).map(Array.init) }

    @Test("a transient ENOSPC fails only the N-th counted call, with the errno, and the plan says so")
    func transientFailsOneCall() throws {
        let directory = TemporaryDirectory()
        let fileSystem = FileSystem.faultInjecting()
        let file = try DiskIO.open(directory.file("log"), flags: O_WRONLY | O_CREAT | O_APPEND, in: fileSystem)
        defer { file.close() }
        let plan = try fileSystem.armFaultPlan(under: directory.path, failingCall: 2, fault: .noSpace)
        defer { plan.disarm() }
        #expect(Self.errnoOf { try file.write([1]) } == nil)
        #expect(Self.errnoOf { try file.write([2]) } == ENOSPC)
        #expect(Self.errnoOf { try file.sync() } == nil)
        #expect(Self.errnoOf { try file.write([3]) } == nil)
        #expect(plan.callsSeen == 4 && plan.fired)
        #expect(plan.failures == [.init(ordinal: 2, call: .write, path: DiskPath.normalize(directory.file("log")))])
        #expect(contents(directory.file("log")) == [1, 3], "the failed write wrote nothing")
    }

    @Test("a persistent EIO fails every counted call from the N-th on, of every kind, until disarmed")
    func persistentFailsEveryLaterCall() throws {
        let directory = TemporaryDirectory()
        let fileSystem = FileSystem.faultInjecting()
        let plan = try fileSystem.armFaultPlan(under: directory.path, failingCall: 2, fault: .ioError, persistence: .persistent)
        #expect(Self.errnoOf { try DiskIO.makeDirectory(directory.file("a"), in: fileSystem) } == nil)
        #expect(Self.errnoOf { try DiskIO.makeDirectory(directory.file("b"), in: fileSystem) } == EIO)
        #expect(Self.errnoOf { _ = try DiskIO.open(directory.file("c"), flags: O_WRONLY | O_CREAT, in: fileSystem) } == EIO)
        #expect(Self.errnoOf { try DiskIO.syncDirectory(directory.path, in: fileSystem) } == EIO)
        #expect(Self.errnoOf { try DiskIO.unlink(directory.file("a"), in: fileSystem) } == EIO)
        #expect(Self.errnoOf { try DiskIO.rename(directory.file("a"), to: directory.file("d"), in: fileSystem) } == EIO)
        #expect(Self.errnoOf { try DiskIO.link(directory.file("a"), to: directory.file("e"), in: fileSystem) } == EIO)
        #expect(plan.failures.map(\.call) == [.makeDirectory, .open, .syncDirectory, .unlink, .rename, .link])
        plan.disarm()
        #expect(Self.errnoOf { try DiskIO.makeDirectory(directory.file("b"), in: fileSystem) } == nil)
        #expect(plan.callsSeen == 7, "a disarmed plan counts nothing")
        #expect(!FileManager.default.fileExists(atPath: directory.file("c")), "a failed open creates nothing")
    }

    @Test("a short write stores the first half of the bytes, then fails with ENOSPC; later calls of a transient plan succeed")
    func shortWriteStoresHalf() throws {
        let directory = TemporaryDirectory()
        let fileSystem = FileSystem.faultInjecting()
        let file = try DiskIO.open(directory.file("data"), flags: O_WRONLY | O_CREAT | O_APPEND, in: fileSystem)
        defer { file.close() }
        let plan = try fileSystem.armFaultPlan(under: directory.path, failingCall: 1, fault: .shortWrite, calls: [.write])
        defer { plan.disarm() }
        #expect(Self.errnoOf { try file.write([1, 2, 3, 4, 5, 6, 7]) } == ENOSPC)
        #expect(contents(directory.file("data")) == [1, 2, 3])
        #expect(Self.errnoOf { try file.sync() } == nil, "syncs are not counted by a plan of writes")
        #expect(Self.errnoOf { try file.write([8]) } == nil)
        #expect(contents(directory.file("data")) == [1, 2, 3, 8])
        #expect(plan.callsSeen == 2)
    }

    @Test("a persistent short write: the first failing write stores part, every later one nothing")
    func persistentShortWrite() throws {
        let directory = TemporaryDirectory()
        let fileSystem = FileSystem.faultInjecting()
        let file = try DiskIO.open(directory.file("data"), flags: O_WRONLY | O_CREAT | O_APPEND, in: fileSystem)
        defer { file.close() }
        let plan = try fileSystem.armFaultPlan(
            under: directory.path, failingCall: 1, fault: .shortWrite, persistence: .persistent, calls: [.write])
        defer { plan.disarm() }
        #expect(Self.errnoOf { try file.write([1, 2, 3, 4]) } == ENOSPC)
        #expect(Self.errnoOf { try file.write([5, 6, 7, 8]) } == ENOSPC)
        #expect(contents(directory.file("data")) == [1, 2])
    }

    @Test("a short write under a simulated disk is recorded: a cut that keeps unsynced data keeps exactly that part")
    func shortWriteIsModelled() throws {
        let directory = TemporaryDirectory()
        let disk = SimulatedDisk(root: directory.path)
        let fileSystem = FileSystem.simulated(disk)
        defer { disk.stopModelling() }
        let file = try DiskIO.open(directory.file("data"), flags: O_WRONLY | O_CREAT | O_APPEND, in: fileSystem)
        try file.write([1])
        try file.sync()
        try DiskIO.syncDirectory(directory.path, in: fileSystem)
        let plan = try fileSystem.armFaultPlan(under: directory.path, failingCall: 1, fault: .shortWrite, calls: [.write])
        #expect(Self.errnoOf { try file.write([2, 3, 4, 5]) } == ENOSPC)
        plan.disarm()
        file.close()
        #expect(disk.unsyncedChanges.pieces == 1, "the part that landed is pending")
        var random = SplitMix64(seed: 1)
        try disk.powerCut(.drop, random: &random)
        #expect(contents(directory.file("data")) == [1], "unsynced, so a drop loses it")
    }

    @Test("calls under another folder are neither counted nor failed")
    func scopedByFolder() throws {
        let mine = TemporaryDirectory()
        let theirs = TemporaryDirectory()
        let fileSystem = FileSystem.faultInjecting()
        let plan = try fileSystem.armFaultPlan(under: mine.path, failingCall: 1, fault: .ioError, persistence: .persistent)
        defer { plan.disarm() }
        #expect(Self.errnoOf { try DiskIO.makeDirectory(theirs.file("x"), in: fileSystem) } == nil)
        #expect(Self.errnoOf { try SecureFile.writeAtomically([1], to: theirs.file("key"), replacing: false, in: fileSystem) } == nil)
        #expect(plan.callsSeen == 0 && !plan.fired)
        #expect(Self.errnoOf { try DiskIO.makeDirectory(mine.file("x"), in: fileSystem) } == EIO)
        plan.disarm()
        #expect(Self.errnoOf { try DiskIO.makeDirectory(mine.file("y"), in: fileSystem) } == nil)
        #expect(plan.callsSeen == 1, "a disarmed plan counts nothing more")
    }

    @Test("a plan armed on one file system leaves the real one and another simulated one over the same folder alone")
    func scopedByFileSystem() throws {
        let directory = TemporaryDirectory()
        let faulty = FileSystem.faultInjecting()
        let other = FileSystem.faultInjecting()
        let plan = try faulty.armFaultPlan(under: directory.path, failingCall: 1, fault: .ioError, persistence: .persistent)
        defer { plan.disarm() }
        #expect(Self.errnoOf { try DiskIO.makeDirectory(directory.file("real"), in: .real) } == nil)
        #expect(Self.errnoOf { try SecureFile.writeAtomically([1], to: directory.file("key"), replacing: false, in: other) } == nil)
        #expect(plan.callsSeen == 0 && !plan.fired)
        #expect(Self.errnoOf { try DiskIO.makeDirectory(directory.file("faulty"), in: faulty) } == EIO)
        #expect(plan.callsSeen == 1 && faulty != other && faulty == faulty)
    }

    @Test("the real file system is not modelled inside a simulated disk's folder: only the simulated file system's calls are recorded")
    func realFileSystemIsNotModelled() throws {
        let directory = TemporaryDirectory()
        let disk = SimulatedDisk(root: directory.path)
        defer { disk.stopModelling() }
        let file = try DiskIO.open(directory.file("real"), flags: O_WRONLY | O_CREAT, in: .real)
        try file.write([7])
        file.close()
        try DiskIO.makeDirectory(directory.file("real-folder"), in: .real)
        #expect(disk.unsyncedChanges.pieces == 0 && disk.unsyncedChanges.entryChanges == 0, "nothing recorded")
        let modelled = try DiskIO.open(directory.file("modelled"), flags: O_WRONLY | O_CREAT, in: .simulated(disk))
        try modelled.write([8])
        modelled.close()
        #expect(disk.unsyncedChanges.pieces == 1 && disk.unsyncedChanges.entryChanges == 1, "its write and its new entry")
        #expect(contents(directory.file("real")) == [7] && contents(directory.file("modelled")) == [8])
    }

    @Test("only the kinds of call asked for are counted")
    func countsOnlyItsKinds() throws {
        let directory = TemporaryDirectory()
        let fileSystem = FileSystem.faultInjecting()
        let plan = try fileSystem.armFaultPlan(under: directory.path, failingCall: 2, fault: .noSpace, calls: [.sync, .syncDirectory])
        defer { plan.disarm() }
        // open, write, sync (1), link, unlink, sync-directory (2: fails).
        #expect(Self.errnoOf { try SecureFile.writeAtomically([1], to: directory.file("key"), replacing: false, in: fileSystem) } == ENOSPC)
        #expect(plan.callsSeen == 2)
        #expect(plan.failures.map(\.call) == [.syncDirectory])
    }

    @Test("a power cut at the N-th call cuts the covering disk there; that call and every later one fail with EIO until disarmed")
    func powerCutInsideAnOperation() throws {
        let directory = TemporaryDirectory()
        let disk = SimulatedDisk(root: directory.path)
        let fileSystem = FileSystem.simulated(disk)
        defer { disk.stopModelling() }
        try SecureFile.writeAtomically([1], to: directory.file("old"), replacing: false, in: fileSystem)
        // writeAtomically(replacing: true): open (1), write (2), sync (3), rename (4), sync-directory (5).
        let plan = try fileSystem.armFaultPlan(under: directory.path, failingCall: 5, fault: .powerCut(.drop, seed: 1), calls: [.syncDirectory])
        #expect(Self.errnoOf { try SecureFile.writeAtomically([2], to: directory.file("old"), replacing: true, in: fileSystem) } == nil,
                "only folder syncs count: this one has one, the first")
        plan.disarm()
        let cut = try fileSystem.armFaultPlan(under: directory.path, failingCall: 4, fault: .powerCut(.drop, seed: 1))
        #expect(Self.errnoOf { try SecureFile.writeAtomically([3], to: directory.file("old"), replacing: true, in: fileSystem) } == EIO)
        #expect(disk.powerCuts == 1 && cut.powerCutReport != nil && cut.powerCutError == nil)
        #expect(contents(directory.file("old")) == [2], "cut before the rename: the old file, durable, and no temporary")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["old"])
        #expect(Self.errnoOf { try DiskIO.makeDirectory(directory.file("after"), in: fileSystem) } == EIO, "dead until disarmed, whatever the kind")
        #expect(cut.failures.map(\.ordinal) == [4, 5, 6], "the rename, the clean-up unlink, the mkdir")
        cut.disarm()
        #expect(Self.errnoOf { try DiskIO.makeDirectory(directory.file("after"), in: fileSystem) } == nil)
    }

    @Test("arming refuses an ordinal below 1, no kinds, a power cut where no simulated disk covers the folder, and the real file system; the key layer reports each as invalid-argument")
    func armRefusesBadPlans() {
        let directory = TemporaryDirectory()
        let fileSystem = FileSystem.faultInjecting()
        func refusal(_ arm: () throws -> DiskFaultPlan) -> String? {
            do { _ = try arm() } catch let error as DiskError { return SecureKeysError(error).description } catch { return "\(error)" }
            return nil
        }
        #expect(refusal { try fileSystem.armFaultPlan(under: directory.path, failingCall: 0, fault: .ioError) }
            == "invalid-argument: a fault plan fails call 1 or later, not 0")
        #expect(refusal { try fileSystem.armFaultPlan(under: directory.path, failingCall: 1, fault: .ioError, calls: []) }
            == "invalid-argument: a fault plan needs at least one kind of call to count")
        #expect(refusal { try fileSystem.armFaultPlan(under: directory.path, failingCall: 1, fault: .powerCut(.drop, seed: 0)) }
            == "invalid-argument: a power cut needs a simulated disk covering the folder")
        #expect(refusal { try FileSystem.real.armFaultPlan(under: directory.path, failingCall: 1, fault: .ioError) }
            == "invalid-argument: a fault plan is armed on a simulated file system, not on the real one")
    }

    @Test("an atomic write under every single fault leaves the old file or the new one, never a temporary, and says when it failed")
    func atomicWriteSweep() throws {
        for fault in [DiskFaultPlan.Fault.noSpace, .ioError, .shortWrite] {
            for persistence in DiskFaultPlan.Persistence.allCases {
                var failing = 1
                while true {
                    let directory = TemporaryDirectory()
                    let fileSystem = FileSystem.faultInjecting()
                    try SecureFile.writeAtomically([1, 1, 1, 1], to: directory.file("key"), replacing: false, in: fileSystem)
                    let plan = try fileSystem.armFaultPlan(under: directory.path, failingCall: failing, fault: fault, persistence: persistence)
                    var failed = false
                    do { try SecureFile.writeAtomically([2, 2, 2, 2], to: directory.file("key"), replacing: true, in: fileSystem) } catch { failed = true }
                    plan.disarm()
                    let label = "\(fault) \(persistence) call \(failing)"
                    guard plan.fired else {
                        #expect(!failed, "\(label): no fault, yet it failed")
                        break
                    }
                    let kept = contents(directory.file("key"))
                    #expect(kept == [1, 1, 1, 1] || kept == [2, 2, 2, 2], "\(label): \(kept ?? [])")
                    if !failed { #expect(kept == [2, 2, 2, 2], "\(label): success, so the new file") }
                    // A failed folder sync comes after the rename: the new file is in place, and the error says so.
                    if kept == [1, 1, 1, 1] { #expect(failed, "\(label): said written, kept the old file") }
                    let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0 != "key" }
                    if persistence == .transient { #expect(leftovers.isEmpty, "\(label): left \(leftovers)") }
                    failing += 1
                }
                #expect(failing > 4, "\(fault) \(persistence): the sweep reached every call (\(failing - 1) fault points)")
            }
        }
    }
}
