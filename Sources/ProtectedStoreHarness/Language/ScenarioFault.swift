package import DiskModel
import SecureKeys

/// What `fault next-io` plans for the next command.
///
/// One of its file-system calls fails, as a full disk, a failing disk or a power cut would make it fail.
///
/// `fault next-io ENOSPC|EIO|short-write|power-cut [--after N] [--persistent] [--mode M] [--seed S]`: the
/// next command's first `N` calls (0 by default) under the state directory succeed and the next one fails —
/// through the key files, the device state, the inbox and the store's SQLite files alike. With
/// `--persistent` every later call of that command fails too; a power cut (`--mode`, `--seed` as for
/// `device power-cut`) always ends the command's I/O, and the device boots again afterwards, before its first
/// unlock, as after `device power-cut`.
public struct ScenarioFault: Sendable, Hashable {
    /// How the failing call fails.
    public enum Kind: Sendable, Hashable {
        /// The disk is full (`ENOSPC`).
        case noSpace
        /// The disk failed (`EIO`).
        case ioError
        /// A write stores half of its bytes, then fails with `ENOSPC`.
        case shortWrite
        /// The power goes just before the call.
        ///
        /// `seed` picks what an unsynced write keeps.
        case powerCut(PowerCutMode, seed: UInt64)

        /// The word `fault next-io` takes.
        ///
        /// It is `ENOSPC`, `EIO`, `short-write` or `power-cut`.
        public var word: String {
            switch self {
            case .noSpace: "ENOSPC"
            case .ioError: "EIO"
            case .shortWrite: "short-write"
            case .powerCut: "power-cut"
            }
        }
    }

    /// How the call fails.
    public var kind: Kind
    /// Calls that succeed before the failing one.
    public var after: Int
    /// Whether every later call of the command fails too.
    public var persistent: Bool

    /// A planned fault.
    ///
    /// - Parameters:
    ///   - kind: how the call fails.
    ///   - after: calls that succeed first (0: the first call fails).
    ///   - persistent: whether every later call of the command fails too.
    public init(_ kind: Kind, after: Int = 0, persistent: Bool = false) {
        self.kind = kind
        self.after = after
        self.persistent = persistent
    }

    /// The words `fault next-io` takes after `next-io`, as a script line writes them.
    var scriptText: String {
        var text = kind.word
        if after > 0 { text += " --after \(after)" }
        if persistent { text += " --persistent" }
        if case .powerCut(let mode, let seed) = kind { text += " --mode \(mode.rawValue) --seed \(seed)" }
        return text
    }

    /// Arms the plan on `fileSystem` for the calls under `root`.
    ///
    /// - Throws: `SecureKeysError` `invalid-argument` for a power cut where the file system's disk does not cover
    ///   `root`.
    package func arm(under root: String, in fileSystem: FileSystem) throws -> DiskFaultPlan {
        let fault: DiskFaultPlan.Fault = switch kind {
        case .noSpace: .noSpace
        case .ioError: .ioError
        case .shortWrite: .shortWrite
        case .powerCut(let mode, let seed): .powerCut(SimulatedDisk.PowerCutMode(rawValue: mode.rawValue)!, seed: seed)
        }
        let kind = DiskFaultSweep.Kind(fault, persistent ? .persistent : .transient)
        return try fileSystem.armFaultPlan(
            under: root, failingCall: after + 1, fault: fault, persistence: kind.persistence, calls: kind.calls)
    }
}
