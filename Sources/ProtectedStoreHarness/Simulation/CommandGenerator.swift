import ProtectedStore
import ProtectedData
import SecureKeys

/// Draws a random but valid next command from the model's state: mostly what makes sense now (unlock when
/// locked, launch when no app runs), sometimes a mistake (a wrong passcode, a UI operation with no app).
struct CommandGenerator {
    private var random: SplitMix64
    private let seed: UInt64
    private var step = 0

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix64(seed: seed)
    }

    private mutating func pick<T>(_ choices: [T]) -> T { choices[Int(random.next() % UInt64(choices.count))] }

    mutating func next(_ model: SimulationModel) -> ScenarioCommand {
        step += 1
        if !model.deviceSetUp {
            return .deviceSetup(passcode: SimulationModel.passcode, grace: model.gracePeriod, wipeAfter: nil)
        }
        var weighted: [(Int, ScenarioCommand)] = [
            (10, .clockAdvance(pick([.milliseconds(100), .seconds(1), .seconds(5), .milliseconds(9999), .seconds(10), .seconds(60)]))),
            (3, .deviceReboot),
            (2, .devicePowerCut(pick(PowerCutMode.allCases), seed: random.next() % 1_000_000)),
            (2, .get(key: pick(Self.keys))),
        ]
        if model.unlocked {
            weighted.append((8, .deviceLock))
        } else {
            weighted.append((14, .deviceUnlock(passcode: model.passcode)))
            // Wrong passcodes, but not so many that the delays swallow the run.
            if model.failures < 5 { weighted.append((3, .deviceUnlock(passcode: "0000"))) }
        }
        if model.appRunning {
            weighted += [
                (10, .ui("op\(step)")),
                (16, .put(key: pick(Self.keys), value: "val-\(seed)-\(step)")),
                (4, .delete(key: pick(Self.keys))),
                (3, .appTerminate),
                (3, .appCrash),
            ]
        } else {
            let reason = pick(LaunchOptions.Reason.allCases)
            let protection: ProtectionClass? = model.storeClass == nil ? pick(ProtectionClass.allCases) : nil
            let delay: Duration = pick([.zero, .zero, .zero, .milliseconds(500), .seconds(2)])
            weighted.append((30, .appLaunch(LaunchOptions(reason: reason), protection: protection, attachDelay: delay)))
            weighted.append((1, .ui("op\(step)")))
        }
        if model.storeAttachedOnce { weighted.append((6, .inboxPut(key: pick(Self.keys), value: "inbox-\(seed)-\(step)"))) }
        let total = weighted.reduce(0) { $0 + $1.0 }
        var roll = Int(random.next() % UInt64(total))
        for (weight, command) in weighted {
            if roll < weight { return command }
            roll -= weight
        }
        return weighted[0].1
    }

    static let keys = ["a", "b", "c", "d", "e"]

    /// Every value this generator writes for `seed` starts with one of these.
    static func valuePrefixes(seed: UInt64) -> [String] { ["val-\(seed)-", "inbox-\(seed)-"] }
}
