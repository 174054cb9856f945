/// SQLite's `do_ioerr_test` loop over a ``DiskFaultPlan``.
///
/// For N = 1, 2, … it resets the fixture, fails the N-th call of an operation, then checks what it left. It
/// stops when the operation runs to its end with the fault unused.
///
/// For the I/O-fault sweeps of the test suite, and for the simulator, which arms the same plans between its
/// commands.
package enum DiskFaultSweep {
    /// One way to fail.
    ///
    /// It is a fault, whether it persists, and the kinds of call counted.
    package struct Kind: Sendable, Hashable, CustomStringConvertible {
        /// How the failing call fails.
        package var fault: DiskFaultPlan.Fault
        /// Whether the calls after it fail too.
        package var persistence: DiskFaultPlan.Persistence
        /// The kinds of call counted (a short write counts writes only).
        package var calls: Set<DiskFaultPlan.Call>

        /// A kind of fault.
        ///
        /// - Parameters:
        ///   - fault: how the failing call fails.
        ///   - persistence: whether the calls after it fail too.
        ///   - calls: the kinds of call counted; by default every kind, or only writes for a short write.
        package init(_ fault: DiskFaultPlan.Fault, _ persistence: DiskFaultPlan.Persistence, calls: Set<DiskFaultPlan.Call>? = nil) {
            self.fault = fault
            self.persistence = persistence
            if let calls {
                self.calls = calls
            } else if case .shortWrite = fault {
                self.calls = [.write]
            } else {
                self.calls = Set(DiskFaultPlan.Call.allCases)
            }
        }

        /// `ENOSPC transient`, `short-write persistent`, …
        package var description: String { "\(fault) \(persistence.rawValue)" }

        /// The six kinds of SQLite's fault simulation here.
        ///
        /// They are `ENOSPC`, `EIO` and a short write, each transient and persistent.
        package static let errors: [Kind] = [DiskFaultPlan.Fault.noSpace, .ioError, .shortWrite].flatMap { fault in
            DiskFaultPlan.Persistence.allCases.map { Kind(fault, $0) }
        }

        /// A power cut (dropping everything unsynced) before the N-th call.
        ///
        /// The operation dies there.
        package static func powerCut(_ mode: SimulatedDisk.PowerCutMode = .drop, seed: UInt64 = 1) -> Kind {
            Kind(.powerCut(mode, seed: seed), .persistent)
        }
    }

    /// One round, in which the operation ran with the N-th call failing.
    package struct Round {
        /// The ordinal of the call the plan failed (or would have).
        package var failingCall: Int
        /// The plan, disarmed.
        ///
        /// It holds its calls seen, its failures and its power cut.
        package var plan: DiskFaultPlan
        /// What the operation threw, or `nil` when it returned.
        package var error: (any Error)?

        /// Whether the plan failed a call.
        package var faultFired: Bool { plan.fired }
        /// `call 3 (write /…/app.sqlite.inbox)`, for messages.
        package var label: String {
            "call \(failingCall)" + (plan.failures.first.map { " (\($0.call) \($0.path))" } ?? " (not reached)")
        }
    }

    /// What a sweep covered.
    package struct Report: Sendable, Equatable, CustomStringConvertible {
        /// Rounds in which the fault fired.
        ///
        /// They are the operation's calls, each failed once.
        package var faultPoints = 0
        /// Calls the operation made when nothing failed (the last round).
        package var callsWithoutFault = 0
        /// Rounds whose operation threw.
        package var failedRounds = 0

        /// `12 fault points (12 calls), 11 failed`.
        package var description: String { "\(faultPoints) fault points (\(callsWithoutFault) calls), \(failedRounds) failed" }
    }

    /// Runs the sweep.
    ///
    /// For N = 1, 2, …, `setUp` makes a fresh fixture (returning its file system and the folder to count calls
    /// under), the plan is armed on that file system, `operation` runs, the plan is disarmed, and `check` looks at what was left. It ends after the
    /// first round whose fault never fired. `check` runs for it too, and the operation must then succeed.
    ///
    /// - Parameters:
    ///   - kind: the fault.
    ///   - limit: the most rounds, a guard against an operation whose calls never end.
    ///   - setUp: makes the fixture; its own calls are not counted.
    ///   - operation: the operation under the fault.
    ///   - check: what must hold after the round (retry, relaunch, reboot).
    /// - Returns: what the sweep covered.
    /// - Throws: what `setUp` or `check` throw, or ``DiskError/invalidArgument(message:path:)`` when the operation
    ///   still made calls after `limit` rounds.
    package static func run<Fixture>(
        _ kind: Kind, limit: Int = 1000, isolation: isolated (any Actor)? = #isolation,
        setUp: () async throws -> (fileSystem: FileSystem, root: String, fixture: Fixture),
        operation: (Fixture) async throws -> Void,
        check: (Fixture, Round) async throws -> Void
    ) async throws -> Report {
        var report = Report()
        for failingCall in 1...limit {
            let (fileSystem, root, fixture) = try await setUp()
            let plan = try fileSystem.armFaultPlan(
                under: root, failingCall: failingCall, fault: kind.fault, persistence: kind.persistence, calls: kind.calls)
            var error: (any Error)?
            do { try await operation(fixture) } catch let thrown { error = thrown }
            plan.disarm()
            let round = Round(failingCall: failingCall, plan: plan, error: error)
            if round.faultFired { report.faultPoints += 1 }
            if error != nil { report.failedRounds += 1 }
            try await check(fixture, round)
            if !round.faultFired {
                report.callsWithoutFault = plan.callsSeen
                return report
            }
        }
        throw DiskError.invalidArgument(message: "the operation still made file-system calls after \(limit) rounds")
    }
}
