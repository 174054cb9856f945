package import SystemPackage

/// A named place in an operation where a test stops it as a crash would, or fails it as the disk would.
///
/// Production code announces the points it passes (``reach(_:path:)``, ``planned(at:path:)``); nothing happens
/// unless a test or the harness installed a ``Plan`` for the current task with `FaultPoint.$plan.withValue`.
/// Each layer declares its points beside the code that reaches them, in an extension of `FaultPoint`, as it
/// declares its error codes.
package struct FaultPoint: Hashable, Sendable, CustomStringConvertible {
    /// The point's name, `atomic-write renamed` or `wipe recorded`.
    package let name: String

    /// A point named `name`.
    package init(_ name: String) { self.name = name }

    /// The name.
    package var description: String { name }

    /// What happens at a planned point.
    package enum Effect: Sendable, Hashable {
        /// The process dies there.
        ///
        /// ``SimulatedCrash`` is thrown and nothing is cleaned up.
        case crash
        /// The call there fails with this error number.
        ///
        /// The layer names the call and the path.
        case fail(Errno)
        /// A write there stores its first `bytes` bytes, then fails with this error number (a short write).
        case failAfterWriting(bytes: Int, Errno)
    }

    /// What a test plans for one task.
    ///
    /// At ``point``, for a path ending with ``pathSuffix`` (any path when it is `nil`), the ``effect`` happens.
    package struct Plan: Sendable, Hashable, CustomStringConvertible {
        /// Where.
        package var point: FaultPoint
        /// What happens there.
        package var effect: Effect
        /// Only for a path ending so, or for any path when `nil`.
        package var pathSuffix: String?

        /// A plan of `effect` at `point`, for a path ending with `pathSuffix` (any path when `nil`).
        package init(_ point: FaultPoint, _ effect: Effect = .crash, pathSuffix: String? = nil) {
            self.point = point
            self.effect = effect
            self.pathSuffix = pathSuffix
        }

        /// `crash at wipe recorded`, `fail(EIO) at wipe removing a key file (uid.tpm)`.
        package var description: String {
            let what = switch effect {
            case .crash: "crash"
            case .fail(let code): "fail(\(code))"
            case .failAfterWriting(let bytes, let code): "fail(\(code)) after \(bytes) bytes"
            }
            return "\(what) at \(point)" + (pathSuffix.map { " (\($0))" } ?? "")
        }
    }

    /// The plan of the current task, if any.
    ///
    /// Only tests and the harness set it.
    @TaskLocal package static var plan: Plan?

    /// What `plan` (the current task's, by default) does at `point` on `path`, or `nil` for nothing.
    ///
    /// A plan passed in is one carried by a configuration to work on threads the task's plan does not reach.
    package static func planned(at point: FaultPoint, path: String? = nil, by plan: Plan? = plan) -> Effect? {
        guard let plan, plan.point == point else { return nil }
        if let suffix = plan.pathSuffix, path?.hasSuffix(suffix) != true { return nil }
        return plan.effect
    }

    /// Announces that an operation reached `point`.
    ///
    /// It throws ``SimulatedCrash`` when `plan` (the current task's, by default) crashes it there, and does
    /// nothing otherwise.
    package static func reach(_ point: FaultPoint, path: String? = nil, by plan: Plan? = plan) throws(SimulatedCrash) {
        if planned(at: point, path: path, by: plan) == .crash { throw SimulatedCrash(point: point) }
    }
}

/// A crash simulated at a ``FaultPoint``.
///
/// The operation stopped there, as it would if the process had died.
package struct SimulatedCrash: Error, Sendable, Hashable {
    /// Where it stopped.
    package let point: FaultPoint

    /// A crash at `point`.
    package init(point: FaultPoint) { self.point = point }
}
