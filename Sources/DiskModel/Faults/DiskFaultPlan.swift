import StoreConcurrency
package import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// A planned I/O failure.
///
/// The N-th file-system call under a folder fails as a full disk, a failing disk or a power cut would make it
/// fail. It is SQLite's `do_ioerr_test` (test/tester.tcl) for the project's own files.
///
/// A plan is armed on a simulated ``FileSystem``
/// (``FileSystem/armFaultPlan(under:failingCall:fault:persistence:calls:)``). While it is armed, every ``DiskIO``
/// call on that file system and every write, sync, truncation and open of a store file through its disk's
/// `protected-store-disk` SQLite VFS whose path is under ``root`` is counted, in one sequence, if its kind is one
/// of ``calls``. The ``failingCall``-th counted call fails with the ``fault``; with ``Persistence/persistent``
/// every counted call after it fails too. Calls on other file systems, or under
/// other folders, are neither counted nor failed, so tests that run in parallel do not disturb each other.
///
/// A sweep runs an operation with N = 1, 2, … and stops once ``fired`` is false after it: the operation made
/// fewer than N calls, so every call has failed once.
///
/// Outside tests and the simulator every call is on ``FileSystem/real``, which has no plans, and pays nothing
/// for them.
package final class DiskFaultPlan: @unchecked Sendable {
    // @unchecked Sendable: the mutable fields are inside `state`, a LockedState.

    /// A kind of file-system call a plan can fail.
    package enum Call: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// `open(2)` of a file for writing (``DiskIO/open(_:flags:mode:in:)``, SQLite's xOpen).
        case open
        /// A write (``DiskIO/File/write(_:)``, xWrite).
        case write
        /// `fsync` of a file (``DiskIO/File/sync(purpose:)``, xSync).
        case sync
        /// `fsync` of a folder (``DiskIO/syncDirectory(_:purpose:in:)``).
        case syncDirectory = "sync-directory"
        /// `rename(2)`.
        case rename
        /// `link(2)`.
        case link
        /// `unlink(2)` (also SQLite's xDelete, which goes through ``DiskIO/unlink(_:in:)``).
        case unlink
        /// `mkdir(2)`.
        case makeDirectory = "mkdir"
        /// `ftruncate(2)` (``DiskIO/File/truncate(to:)``, xTruncate).
        case truncate

        /// The call's name, as ``Failure`` reports it.
        package var description: String { rawValue }
    }

    /// How the failing call fails.
    package enum Fault: Sendable, Hashable, CustomStringConvertible {
        /// The disk is full (`ENOSPC`).
        ///
        /// Nothing of the call is done.
        case noSpace
        /// The disk failed (`EIO`).
        ///
        /// Nothing of the call is done.
        case ioError
        /// A write stores part of its bytes, then fails with `ENOSPC`.
        ///
        /// It stores half, at least one when it has more than one, as `write(2)` does when the disk fills during
        /// it. Any other kind of call fails with `ENOSPC`. Later failing writes of a persistent plan store
        /// nothing.
        case shortWrite
        /// The power goes just before the call.
        ///
        /// The ``SimulatedDisk`` of the file system the plan is armed on, which covers ``DiskFaultPlan/root``, is
        /// cut (``SimulatedDisk/powerCut(_:random:)`` with this mode and seed), and the call fails with `EIO`. So
        /// does every later counted call until the plan is disarmed, as the process is dead as far as the disk can
        /// tell. Always persistent.
        case powerCut(SimulatedDisk.PowerCutMode, seed: UInt64)

        /// `ENOSPC`, `EIO`, `short-write` or `power-cut` (the words of the scenario language).
        package var description: String {
            switch self {
            case .noSpace: "ENOSPC"
            case .ioError: "EIO"
            case .shortWrite: "short-write"
            case .powerCut(let mode, let seed): "power-cut(\(mode.rawValue), seed \(seed))"
            }
        }
    }

    /// Whether calls after the failing one fail too.
    package enum Persistence: String, Sendable, Hashable, CaseIterable {
        /// Only the ``DiskFaultPlan/failingCall``-th call fails (a disk that was full for a moment).
        case transient
        /// Every counted call from the ``DiskFaultPlan/failingCall``-th on fails (a disk that stays full).
        case persistent
    }

    /// What a counted call must do instead of its work.
    package enum Action: Sendable, Equatable {
        /// Fail with this error number, doing nothing.
        case fail(errno: Errno)
        /// Write the first `count` bytes of the write, then fail with `ENOSPC`.
        case writePart(count: Int)
    }

    /// One call the plan failed.
    package struct Failure: Sendable, Equatable, CustomStringConvertible {
        /// Its ordinal among the counted calls, from 1.
        package var ordinal: Int
        /// Its kind.
        package var call: Call
        /// The path it named.
        package var path: String

        /// `#ordinal call path`.
        package var description: String { "#\(ordinal) \(call) \(path)" }
    }

    /// The folder whose calls the plan counts (absolute, standardized).
    package let root: String
    /// The kinds of call it counts.
    ///
    /// Others pass untouched and uncounted.
    package let calls: Set<Call>
    /// The ordinal of the first call that fails, from 1.
    package let failingCall: Int
    /// How it fails.
    package let fault: Fault
    /// Whether later calls fail too.
    package let persistence: Persistence

    private struct Progress {
        var seen = 0
        var failures: [Failure] = []
        var powerCutReport: SimulatedDisk.PowerCutReport?
        var powerCutError: DiskError?
        /// The planned cut was decided (it may still be running on another thread).
        var cutStarted = false
        var isArmed = true
    }

    private let state = LockedState(Progress())
    /// The disk a planned power cut cuts (weak: the disk holds its armed plans).
    private weak let disk: SimulatedDisk?
    /// Where the plan is armed (weak: it holds the plan while armed).
    private weak let armedIn: ArmedFaultPlans?

    /// A plan armed in `armedIn`, cutting `disk` for a power cut
    /// (``FileSystem/armFaultPlan(under:failingCall:fault:persistence:calls:)``).
    ///
    /// - Throws: ``DiskError/invalidArgument(message:path:)`` for an ordinal below 1, an empty set of calls, or a
    ///   power cut planned where `disk` does not cover `root`.
    init(
        root: String, failingCall: Int, fault: Fault, persistence: Persistence, calls: Set<Call>,
        disk: SimulatedDisk?, armedIn: ArmedFaultPlans
    ) throws(DiskError) {
        guard failingCall >= 1 else {
            throw .invalidArgument(message: "a fault plan fails call 1 or later, not \(failingCall)")
        }
        guard !calls.isEmpty else {
            throw .invalidArgument(message: "a fault plan needs at least one kind of call to count")
        }
        let root = DiskPath.normalize(root)
        if case .powerCut = fault, disk?.covers(root) != true {
            throw .invalidArgument(message: "a power cut needs a simulated disk covering the folder", path: root)
        }
        self.root = root
        self.calls = calls
        self.failingCall = failingCall
        self.fault = fault
        self.persistence = persistence
        self.disk = disk
        self.armedIn = armedIn
    }

    /// Disarms the plan.
    ///
    /// Calls under ``root`` are plain calls again. What it saw stays readable.
    package func disarm() {
        state.withLock { $0.isArmed = false }
        armedIn?.remove(self)
    }

    /// Whether the plan still counts calls.
    package var isArmed: Bool { state.withLock { $0.isArmed } }

    /// How many calls it counted.
    package var callsSeen: Int { state.withLock { $0.seen } }

    /// The calls it failed, in order.
    package var failures: [Failure] { state.withLock { $0.failures } }

    /// Whether it failed a call.
    ///
    /// It is false once an operation made fewer calls than ``failingCall``, which ends a sweep.
    package var fired: Bool { state.withLock { !$0.failures.isEmpty } }

    /// What the planned power cut did, once it happened.
    package var powerCutReport: SimulatedDisk.PowerCutReport? { state.withLock { $0.powerCutReport } }

    /// Why the planned power cut could not rewrite the folder, if it could not (the call failed anyway).
    package var powerCutError: DiskError? { state.withLock { $0.powerCutError } }

    // MARK: Asked through the file system it is armed on (DiskIO and the SQLite VFS)

    /// Whether the plan's root holds the absolute, standardized `path`.
    func holds(_ path: String) -> Bool { path == root || path.hasPrefix(root + "/") }

    /// Counts a call under ``root`` of `kind`, and says what it must do instead of its work (`nil`: do it).
    func count(_ kind: Call, path: String, byteCount: Int) -> Action? {
        enum Decision { case none, act(Action), cut(SimulatedDisk.PowerCutMode, UInt64) }
        let decision: Decision = state.withLock { progress in
            guard progress.isArmed else { return .none }
            let alreadyCut = progress.cutStarted
            // After the planned cut every call fails, whatever its kind: the process is dead to the disk.
            guard calls.contains(kind) || alreadyCut else { return .none }
            progress.seen += 1
            let ordinal = progress.seen
            let firstFailure = ordinal == failingCall
            let fails: Bool
            switch fault {
            case .powerCut: fails = ordinal >= failingCall
            default: fails = firstFailure || (persistence == .persistent && ordinal > failingCall)
            }
            guard fails else { return .none }
            progress.failures.append(Failure(ordinal: ordinal, call: kind, path: path))
            switch fault {
            case .noSpace: return .act(.fail(errno: .noSpace))
            case .ioError: return .act(.fail(errno: .ioError))
            case .shortWrite:
                guard kind == .write, firstFailure, byteCount > 1 else { return .act(.fail(errno: .noSpace)) }
                return .act(.writePart(count: max(1, byteCount / 2)))
            case .powerCut(let mode, let seed):
                if alreadyCut { return .act(.fail(errno: .ioError)) }
                progress.cutStarted = true
                return .cut(mode, seed)
            }
        }
        switch decision {
        case .none:
            return nil
        case .act(let action):
            return action
        case .cut(let mode, let seed):
            // Outside the lock: the cut takes the disk's own locks, and SQLite's callbacks may be on this stack.
            var random = SplitMix64(seed: seed)
            do throws(DiskError) {
                guard let disk else {
                    throw .io(operation: "no simulated disk covers the folder to cut", path: root, errno: .operationNotSupportedByDevice)
                }
                let report = try disk.powerCut(mode, random: &random)
                state.withLock { $0.powerCutReport = report }
            } catch {
                state.withLock { $0.powerCutError = error }
            }
            return .fail(errno: .ioError)
        }
    }
}
