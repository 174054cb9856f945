/// The file system an operation reads and writes: the real one, or one whose changes a simulation records.
///
/// It is passed in through configuration (``real`` by default) and down to ``DiskIO`` and the store's
/// SQLite connections, rather than looked up on every call: the real file system costs a real app nothing
/// beyond the system call.
///
/// A simulated file system carries the ``SimulatedDisk`` that records its changes (if any) and the place
/// where its ``DiskFaultPlan``s are armed (``armFaultPlan(under:failingCall:fault:persistence:calls:)``). It is
/// a value that copies two references; copies share the disk and the armed plans.
package struct FileSystem: Sendable, Hashable {
    private enum Form: Sendable {
        case real
        case simulated(SimulatedDisk?, ArmedFaultPlans)
    }

    private let form: Form

    private init(_ form: Form) { self.form = form }

    /// The system's own file system: no disk model, no fault plan. Every call goes straight to the system.
    package static let real = FileSystem(.real)

    /// The file system `disk` models, with the disk's fault plans.
    package static func simulated(_ disk: SimulatedDisk) -> FileSystem { FileSystem(.simulated(disk, disk.faultPlans)) }

    /// A real file system whose calls fault plans armed on it can fail, without a disk model.
    ///
    /// Each call makes a new one, with no plan armed.
    package static func faultInjecting() -> FileSystem { FileSystem(.simulated(nil, ArmedFaultPlans())) }

    /// The simulated disk that records a change to `path`, if any: this file system's disk when its folder
    /// holds `path`.
    package func disk(covering path: String) -> SimulatedDisk? {
        switch form {
        case .real: nil
        case .simulated(let disk, _): disk.flatMap { $0.covers(path) ? $0 : nil }
        }
    }

    /// What the call of `kind` on `path` must do instead of its work, or `nil` to do it.
    ///
    /// It counts the call in the first fault plan armed on this file system whose root holds `path`. A planned
    /// power cut happens here, before the call. The ``real`` file system has no plan and answers `nil` at
    /// once.
    ///
    /// - Parameters:
    ///   - kind: the kind of call.
    ///   - path: the path it names (for a write, sync or truncation, the path the file was opened at).
    ///   - byteCount: the size of a write, for a short write.
    package func faultAction(for kind: DiskFaultPlan.Call, path: String, byteCount: Int = 0) -> DiskFaultPlan.Action? {
        switch form {
        case .real: nil
        case .simulated(_, let plans): plans.action(for: kind, path: path, byteCount: byteCount)
        }
    }

    /// Arms a fault plan on this file system.
    ///
    /// From now on the calls under `root` on this file system are counted, and the `failingCall`-th fails.
    ///
    /// - Parameters:
    ///   - root: the folder whose calls count (a test's own directory, a session's state directory).
    ///   - failingCall: the ordinal of the call that fails, from 1.
    ///   - fault: how it fails.
    ///   - persistence: whether the calls after it fail too (a power cut always makes them fail).
    ///   - calls: the kinds of call counted (all of them by default; a short-write sweep counts writes only).
    /// - Returns: the plan, armed until ``DiskFaultPlan/disarm()``.
    /// - Throws: ``DiskError/invalidArgument(message:path:)`` for an ordinal below 1, an empty set of calls, a
    ///   power cut planned where the file system's disk does not cover `root`, or a plan armed on the ``real``
    ///   file system.
    @discardableResult
    package func armFaultPlan(
        under root: String, failingCall: Int, fault: DiskFaultPlan.Fault,
        persistence: DiskFaultPlan.Persistence = .transient, calls: Set<DiskFaultPlan.Call> = Set(DiskFaultPlan.Call.allCases)
    ) throws(DiskError) -> DiskFaultPlan {
        switch form {
        case .real:
            throw .invalidArgument(
                message: "a fault plan is armed on a simulated file system, not on the real one", path: root)
        case .simulated(let disk, let plans):
            return try plans.arm(
                under: root, failingCall: failingCall, fault: fault, persistence: persistence, calls: calls, disk: disk)
        }
    }

    /// Two file systems are equal when they are the same: both real, or sharing their disk and plans.
    package static func == (left: FileSystem, right: FileSystem) -> Bool {
        switch (left.form, right.form) {
        case (.real, .real): true
        case (.simulated(_, let left), .simulated(_, let right)): left === right
        default: false
        }
    }

    /// Hashes the identity that ``==`` compares.
    package func hash(into hasher: inout Hasher) {
        switch form {
        case .real: hasher.combine(0)
        case .simulated(_, let plans): hasher.combine(ObjectIdentifier(plans))
        }
    }
}
