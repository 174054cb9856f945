import DiskModel
import ProtectedStore
import ProtectedData
import SecureKeys

/// Draws a random but valid next command from the model's state.
///
/// It draws mostly what makes sense now (unlock when locked, launch when no app runs), sometimes a mistake (a wrong
/// passcode, a UI operation with no app).
///
/// It covers the whole product: passcode changes (right and wrong old passcodes), in one seed in eight a
/// device set up to erase itself after a few wrong passcodes and then attacked until it does, inbox records
/// of kinds the app cannot apply (quarantined, retried, discarded), values at the inbox's 4 MiB limit and
/// direct puts as large, reads beside writes, and appends by another process while the app runs. Now and
/// then it damages the inbox, the store's key file, the keybag or the device state file, cuts the store file
/// short or puts a link or a FIFO in place of the store's files, meets the damage, and restores the file.
struct CommandGenerator {
    private var random: SplitMix64
    private let seed: UInt64
    private var step = 0
    /// The command a `fault next-io` was just drawn for.
    ///
    /// It comes next, so the fault falls inside it.
    private var faulted: ScenarioCommand?
    /// The commands that come next, in order, after a key file or device file was damaged.
    ///
    /// They are the one that meets the damage, the restore, and a boot from the restored file.
    private var followUps: [ScenarioCommand] = []
    /// The draws of file damage.
    ///
    /// They are a stream of their own, so the other commands of a seed stay as they were until a damage happens.
    private var damageRandom: SplitMix64
    /// The draws of damage to the store's own files.
    ///
    /// They are a stream of their own, so the draws of the other file damage stay as they were.
    private var storeDamageRandom: SplitMix64
    /// The device's `--wipe-after`.
    ///
    /// It is a few failures in one seed in eight (decided by the seed), and `nil` otherwise.
    let wipeAfter: Int?
    /// In one other seed in eight, wrong passcodes are tried often enough to reach the delays (the 5th
    /// consecutive failure imposes a minute), so attempts during a delay and reboots that restart it are seen.
    let guessesOften: Bool
    /// From this step on, a seed with ``wipeAfter`` guesses passcodes until the device erases itself, so the
    /// rest of the run checks that nothing erased comes back.
    static let attackFromStep = 60

    init(seed: UInt64) {
        self.seed = seed
        random = SplitMix64(seed: seed)
        // A stream of its own, so the choice does not shift the commands of the other seeds.
        var decider = SplitMix64(seed: seed ^ 0x5749_5045_5749_5045)
        let draw = decider.next() % 8
        wipeAfter = draw == 0 ? Int(3 + decider.next() % 3) : nil
        guessesOften = draw == 1
        damageRandom = SplitMix64(seed: seed ^ 0x4441_4D41_4745_4441)
        storeDamageRandom = SplitMix64(seed: seed ^ 0x5354_4F52_4546_494C)
    }

    private mutating func pick<T>(_ choices: [T]) -> T { choices[Int(random.next() % UInt64(choices.count))] }

    mutating func next(_ model: SimulationModel) -> ScenarioCommand {
        if let faulted {
            self.faulted = nil
            return faulted
        }
        if !followUps.isEmpty { return followUps.removeFirst() }
        let command = draw(model)
        // Now and then an I/O fault or a power cut inside the command: one of its first few file-system calls
        // fails. Only inside the operations that write (appends, merges, attaches, passcode changes, wipes,
        // puts): a reboot the fault stopped would leave the session with no device at all.
        // The attempt that erases a device is faulted more often (one in two): a wipe stopped part-way must be
        // finished by the next attempt or boot (invariant 9), and only a fault or a cut stops one.
        let erasing = model.nextFailureWipes && command == .deviceUnlock(passcode: Self.wrongPasscode)
        let odds = erasing ? 2 : Self.faultOdds
        guard model.deviceSetUp, random.next() % odds == 0, Self.mayFault(command) else { return command }
        let kind: ScenarioFault.Kind = switch random.next() % 4 {
        case 0: .noSpace
        case 1: .ioError
        case 2: .shortWrite
        default: .powerCut(pick(PowerCutMode.allCases), seed: random.next() % 1_000_000)
        }
        faulted = command
        // An erase records itself in its first four calls, then removes the key files (calls 5 to 9): a fault
        // there leaves an erase that only the next attempt or boot can finish.
        let after = erasing ? 4 + Int(random.next() % 5) : Int(random.next() % 9)
        return .faultNextIO(ScenarioFault(kind, after: after, persistent: random.next() % 3 == 0))
    }

    /// One step in this many, of those with records waiting and no app, damages the inbox.
    static let damageOdds: UInt64 = 12

    /// One step in this many, of those with no app running, damages a key file or a device file.
    static let fileDamageOdds: UInt64 = 40

    /// The files the generator damages besides the inbox, and the shortest each can be.
    ///
    /// Every offset it flips is below that length (a keybag, a device state file and a store key file are each
    /// longer).
    static let damageableFiles: [(file: DamagedFile, shortest: Int)] = [(.storeKey, 60), (.keybag, 100), (.deviceState, 100)]

    /// A damage that a checked file always notices.
    ///
    /// It is a flipped byte at an offset below `shortest`, or a tail of 2 to 17 bytes cut off (more than a trailing
    /// newline). Every bit of the flipped byte is inverted, so a JSON character becomes a byte that is not UTF-8 and
    /// a sealed or tagged byte fails its check.
    ///
    /// Never a key file's version byte (offset 4, after its magic): a flipped version is a format this code does
    /// not know, `unsupported-key-format`, not damage.
    private mutating func fileDamage(_ file: DamagedFile, shortest: Int) -> Damage {
        guard damageRandom.next() % 2 == 0 else { return .truncateTail(2 + Int(damageRandom.next() % 16)) }
        let offset = Int(damageRandom.next() % UInt64(shortest))
        return .flipByte(offset: offset == 4 && file != .deviceState ? 5 : offset)
    }

    /// Now and then, with no app running and no boot or erase left uncertain by a fault, one key file or
    /// device file is damaged, and the next steps meet the damage (a launch whose attach reads the store's
    /// key file, or a boot that reads the keybag and state file), restore the file and go on from it.
    private mutating func drawFileDamage(_ model: SimulationModel) -> ScenarioCommand? {
        guard !model.appRunning, !model.wiped, model.damaged == nil, !model.bootFailed, !model.attemptMayBeUnrecorded,
            model.passcodeAtBoot == nil, damageRandom.next() % Self.fileDamageOdds == 0
        else { return nil }
        // The store's key file is read by an attach, which needs its class's keys: only then is it met.
        let storeKeyMet = model.storeAttachedOnce && model.storeClass.map { model.keysHeld($0) } == true
        let candidates = Self.damageableFiles.filter { $0.file != .storeKey || storeKeyMet }
        let (file, shortest) = candidates[Int(damageRandom.next() % UInt64(candidates.count))]
        let damage = fileDamage(file, shortest: shortest)
        switch file {
        case .storeKey:
            followUps = [
                .appLaunch(
                    LaunchOptions(reason: LaunchOptions.Reason.allCases[Int(damageRandom.next() % UInt64(LaunchOptions.Reason.allCases.count))]), protection: nil,
                    attachDelay: .zero),
                .appTerminate, .damage(file, .restore),
            ]
        default:
            followUps = [.deviceReboot, .damage(file, .restore), .deviceReboot]
        }
        return .damage(file, damage)
    }

    /// One step in this many, of those with no app running and the store's keys held, damages one of the
    /// store's own files.
    static let storeFileDamageOdds: UInt64 = 10

    /// The damages of the store's own files.
    ///
    /// The store file is cut to 0 bytes, 1 byte or shorter than its first page (4096 bytes; `nil` here means a length
    /// drawn below it), or the store file, its write-ahead log or its shared-memory index is replaced by a symbolic
    /// link or a FIFO.
    static let storeFileDamages: [(file: DamagedFile, damage: Damage?)] = [
        (.store, .truncate(0)), (.store, .truncate(1)), (.store, nil), (.store, .link), (.store, .fifo),
        (.storeLog, .link), (.storeLog, .fifo), (.storeSharedMemory, .link), (.storeSharedMemory, .fifo),
    ]

    /// Now and then cuts one of the store's own files short or replaces it by a link or a FIFO.
    ///
    /// It does so with no app running, the store attached before and its keys held. The next steps meet it (a launch,
    /// whose attach must refuse it and present the refusal), end the app and restore the file.
    private mutating func drawStoreFileDamage(_ model: SimulationModel) -> ScenarioCommand? {
        guard !model.appRunning, !model.wiped, model.damaged == nil, !model.bootFailed, !model.attemptMayBeUnrecorded,
            model.passcodeAtBoot == nil, model.storeAttachedOnce, model.storeClass.map({ model.keysHeld($0) }) == true,
            storeDamageRandom.next() % Self.storeFileDamageOdds == 0
        else { return nil }
        let (file, drawn) = Self.storeFileDamages[Int(storeDamageRandom.next() % UInt64(Self.storeFileDamages.count))]
        let damage = drawn ?? .truncate(2 + Int(storeDamageRandom.next() % 4094))
        let reasons = LaunchOptions.Reason.allCases
        followUps = [
            .appLaunch(LaunchOptions(reason: reasons[Int(storeDamageRandom.next() % UInt64(reasons.count))]), protection: nil, attachDelay: .zero),
            .appTerminate, .damage(file, .restore),
        ]
        return .damage(file, damage)
    }

    /// One command in this many (of those ``mayFault(_:)`` allows) runs under a `fault next-io`.
    static let faultOdds: UInt64 = 25

    /// Whether a fault may be planned for `command`.
    ///
    /// It may for one that writes, and not for a set-up, reboot or power cut.
    static func mayFault(_ command: ScenarioCommand) -> Bool {
        switch command {
        case .deviceUnlock, .deviceChangePasscode, .appLaunch, .put, .delete, .inboxPut, .inboxRetry, .inboxDiscard, .ui:
            true
        default:
            false
        }
    }

    private mutating func draw(_ model: SimulationModel) -> ScenarioCommand {
        step += 1
        if !model.deviceSetUp {
            return .deviceSetup(passcode: SimulationModel.passcode, grace: model.gracePeriod, wipeAfter: wipeAfter)
        }
        // Rare and slow: a value at the edge of the inbox's 4 MiB record limit, or a direct put as large. Only
        // in the second half of a run: each step after one rescans and rereads megabytes.
        let rare = random.next() % Self.largeValueOdds
        if step >= Self.largeValuesFromStep, rare == 0, model.storeAttachedOnce {
            let key = pick(Self.keys)
            let kind: String? = pick([nil, nil, pick(Self.unknownKinds)])
            let fits = InboxRecord.maximumPayloadLength - SimulationModel.inboxPayloadLength(key: key, value: "", kind: kind)
            return .inboxPut(key: key, value: ScenarioValue.filled(fits - 3 + Int(random.next() % 7)), kind: kind)
        }
        if step >= Self.largeValuesFromStep, rare == 1, model.appRunning {
            return .put(key: pick(Self.keys), value: ScenarioValue.filled((4 << 20) - Int(random.next() % 4096)))
        }
        // Damage mode, now and then: with no app to merge them and several acknowledged records waiting, the
        // first record's length is made to claim far past the file's end, so a merge cannot read it and must
        // move its bytes aside and still merge every intact record after it.
        if !model.appRunning, !model.wiped, !model.inboxHasDamage, model.pendingInbox.count >= 2, model.pendingInbox.allSatisfy({ !$0.optional }),
            random.next() % Self.damageOdds == 0
        {
            // Never the first record's own length, or the damage changes nothing (a record at the size limit has
            // the limit's length).
            let first = model.pendingInbox[0]
            let sealedOverhead = InboxRecord.maximumSealedLength - InboxRecord.maximumPayloadLength
            let ownLength = first.value.map {
                SimulationModel.inboxPayloadLength(key: first.key, value: $0, kind: first.kind) + sealedOverhead
            }
            let claimed = ownLength == InboxRecord.maximumSealedLength ? InboxRecord.maximumSealedLength - 1 : InboxRecord.maximumSealedLength
            return .damage(.inbox, .setLength(recordAt: 0, value: UInt32(claimed)))
        }
        if let damage = drawFileDamage(model) { return damage }
        if let damage = drawStoreFileDamage(model) { return damage }
        let attacking = wipeAfter != nil && step >= Self.attackFromStep && !model.wiped
        // A wrong passcode may be tried unless it would only run into delays; the one that erases the device
        // comes with or without the app running (its store, of any class, must close then).
        let wrongAllowed = !model.wiped && (attacking || model.failures < 5)
        let wrongWeight = attacking ? 20 : guessesOften ? 12 : 3
        var weighted: [(Int, ScenarioCommand)] = [
            (10, .clockAdvance(pick([.milliseconds(100), .seconds(1), .seconds(5), .milliseconds(9999), .seconds(10), .seconds(60)]))),
            (3, .deviceReboot),
            (2, .devicePowerCut(pick(PowerCutMode.allCases), seed: random.next() % 1_000_000)),
            (2, .get(key: pick(Self.keys))),
        ]
        if model.unlocked {
            weighted.append((8, .deviceLock))
        } else {
            weighted.append((model.wiped || attacking ? 2 : guessesOften ? 4 : 14, .deviceUnlock(passcode: model.passcode)))
            if wrongAllowed { weighted.append((wrongWeight, .deviceUnlock(passcode: Self.wrongPasscode))) }
        }
        if !model.wiped {
            // A right passcode resets the count: seldom while guessing.
            if !attacking, !guessesOften || model.failures == 0 {
                weighted.append((2, .deviceChangePasscode(old: model.passcode, new: pick(Self.passcodes))))
            }
            if wrongAllowed { weighted.append((wrongWeight / 3 + 1, .deviceChangePasscode(old: Self.wrongPasscode, new: pick(Self.passcodes)))) }
        } else {
            weighted.append((1, .deviceChangePasscode(old: model.passcode, new: pick(Self.passcodes))))
        }
        if model.appRunning {
            weighted += [
                (10, .ui("op\(step)")),
                (16, .put(key: pick(Self.keys), value: "val-\(seed)-\(step)")),
                (6, .get(key: pick(Self.keys))),
                (4, .delete(key: pick(Self.keys))),
                (3, .appTerminate),
                (3, .appCrash),
                (2, .inboxRetry),
                (1, .inboxDiscard(nil)),
                (1, .inboxQuarantine),
            ]
            // An attack with the app running: end the app, so the erasing failure may come.
            if attacking, !wrongAllowed { weighted.append((20, pick([.appTerminate, .appCrash]))) }
        } else {
            let reason = pick(LaunchOptions.Reason.allCases)
            let protection: ProtectionClass? = model.storeClass == nil ? pick(ProtectionClass.allCases) : nil
            let delay: Duration = pick([.zero, .zero, .zero, .milliseconds(500), .seconds(2)])
            weighted.append((attacking ? 5 : 30, .appLaunch(LaunchOptions(reason: reason), protection: protection, attachDelay: delay)))
            weighted.append((1, .ui("op\(step)")))
        }
        if model.storeAttachedOnce {
            weighted += [
                (6, .inboxPut(key: pick(Self.keys), value: "inbox-\(seed)-\(step)")),
                (2, .inboxPut(key: pick(Self.keys), value: "inbox-\(seed)-\(step)", kind: pick(Self.unknownKinds))),
                (model.appRunning ? 3 : 1, .inboxPut(key: pick(Self.keys), value: "inbox-\(seed)-\(step)", otherProcess: true)),
            ]
        }
        let total = weighted.reduce(0) { $0 + $1.0 }
        var roll = Int(random.next() % UInt64(total))
        for (weight, command) in weighted {
            if roll < weight { return command }
            roll -= weight
        }
        return weighted[0].1
    }

    /// One step in this many (from ``largeValuesFromStep``) appends a value at the inbox's limit, and as many
    /// put a 4 MiB value.
    static let largeValueOdds: UInt64 = 800
    static let largeValuesFromStep = 100

    static let keys = ["a", "b", "c", "d", "e"]
    /// Passcodes a change may set, never ``wrongPasscode``.
    static let passcodes: [ScenarioPasscode] = ["1234", "5678", "2580", "1111"]
    /// The passcode every wrong attempt uses.
    static let wrongPasscode: ScenarioPasscode = "0000"
    /// Kinds of inbox record this tool's app has no handler for.
    ///
    /// Each is quarantined at the merge.
    static let unknownKinds = ["note-starred", "sticker", "reaction"]

    /// Every value this generator writes for `seed` starts with one of these (a large value is
    /// ``ScenarioValue/filled(_:)``, which starts with its first 32 bytes).
    static func valuePrefixes(seed: UInt64) -> [String] { ["val-\(seed)-", "inbox-\(seed)-", ScenarioValue.filled(32)] }
}
