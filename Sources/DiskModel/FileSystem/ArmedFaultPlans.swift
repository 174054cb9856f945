import StoreConcurrency

/// The fault plans armed on one simulated file system, in the order they were armed.
///
/// A ``SimulatedDisk`` has one (``SimulatedDisk/faultPlans``); ``FileSystem/faultInjecting()`` makes one
/// without a disk. ``FileSystem/armFaultPlan(under:failingCall:fault:persistence:calls:)`` arms a plan here,
/// and ``DiskFaultPlan/disarm()`` takes it out.
package final class ArmedFaultPlans: Sendable {
    private let plans = LockedState<[DiskFaultPlan]>([])

    /// No plan armed yet.
    package init() {}

    func arm(
        under root: String, failingCall: Int, fault: DiskFaultPlan.Fault, persistence: DiskFaultPlan.Persistence,
        calls: Set<DiskFaultPlan.Call>, disk: SimulatedDisk?
    ) throws(DiskError) -> DiskFaultPlan {
        let plan = try DiskFaultPlan(
            root: root, failingCall: failingCall, fault: fault, persistence: persistence, calls: calls, disk: disk, armedIn: self)
        plans.withLock { $0.append(plan) }
        return plan
    }

    func remove(_ plan: DiskFaultPlan) {
        plans.withLock { $0.removeAll { $0 === plan } }
    }

    /// What the call must do, counted in the first armed plan whose root holds `path`; `nil` to do it.
    func action(for kind: DiskFaultPlan.Call, path: String, byteCount: Int) -> DiskFaultPlan.Action? {
        let plan: DiskFaultPlan? = plans.withLock { plans in
            guard !plans.isEmpty else { return nil }
            let absolute = DiskPath.normalize(path)
            return plans.first { $0.holds(absolute) }
        }
        guard let plan else { return nil }
        return plan.count(kind, path: DiskPath.normalize(path), byteCount: byteCount)
    }
}
