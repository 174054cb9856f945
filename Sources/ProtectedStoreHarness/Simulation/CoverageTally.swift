import DiskModel
import ProtectedStore
import SecureKeys

/// What a run (or many) exercised beyond the everyday commands, and how each ended.
///
/// It is the proof that the generator reaches every feature, printed by `simulate` under its summary.
public struct CoverageTally: Sendable, Equatable {
    /// Passcode changes that succeeded.
    public var passcodeChanges = 0
    /// Passcode changes refused for a wrong old passcode (counted as failed attempts).
    public var passcodeChangesRefused = 0
    /// Unlocks refused for a wrong passcode.
    public var wrongUnlocks = 0
    /// Attempts refused because a passcode delay was running.
    public var passcodeDelays = 0
    /// Devices that erased themselves after too many wrong passcodes.
    public var wipes = 0
    /// Steps after a wipe, each checked for no keybag, no device key and nothing available.
    public var stepsAfterWipe = 0
    /// Inbox records of a kind the app cannot apply, appended.
    public var unknownKindRecords = 0
    /// Records merges moved to the quarantine.
    public var quarantined = 0
    /// `inbox retry` runs.
    public var retries = 0
    /// `inbox discard` runs.
    public var discards = 0
    /// The records they removed.
    public var discardedRecords = 0
    /// Inbox appends by another process.
    public var otherProcessAppends = 0
    /// Inbox appends at the 4 MiB record limit.
    public var largeInboxAppends = 0
    /// Of those, the ones refused as too large (nothing written).
    public var largeInboxRefused = 0
    /// Direct puts of about 4 MiB.
    public var largePuts = 0
    /// `get` results compared with the model.
    public var readsChecked = 0

    /// `fault next-io` faults that fired, by kind.
    ///
    /// The kinds are a full disk, a failing disk, a short write and a power cut.
    public var faultsNoSpace = 0
    /// … a failing disk (`EIO`).
    public var faultsIOError = 0
    /// … a short write.
    public var faultsShortWrite = 0
    /// … a power cut inside the command.
    public var faultsPowerCut = 0
    /// Planned faults the command ended before reaching (it made fewer calls).
    public var faultsUnused = 0
    /// Faulted commands that ended in an error.
    ///
    /// The others absorbed the fault, by a retry or a swallowed checkpoint.
    public var faultedCommandsFailed = 0
    /// Faults that fell inside a wrong passcode (its counter or the wipe it starts), a passcode change, a
    /// launch (attach and merge), a store write, an inbox append.
    public var faultsInAttempts = 0
    /// … inside a passcode change.
    public var faultsInPasscodeChanges = 0
    /// … inside a launch (attach and merge).
    public var faultsInLaunches = 0
    /// … inside a store write.
    public var faultsInWrites = 0
    /// … inside an inbox append.
    public var faultsInAppends = 0

    /// Inbox records damaged (their length made to claim past the file's end), and the intact records beside
    /// them that were still required to be merged or quarantined.
    public var damagedRecords = 0
    /// Intact records beside a damaged one, each required to be merged or quarantined.
    public var intactRecordsAfterDamage = 0

    /// Key files damaged (the store's or the inbox's key file), each required to be reported, never replaced.
    public var damagedKeyFiles = 0
    /// Keybags damaged, each required to stop the boot as a damaged key file and to be left as it is.
    public var damagedKeybags = 0
    /// Device state files damaged, each required to stop the boot as damaged device state, left as it is.
    public var damagedDeviceStates = 0
    /// Store files cut to 0 bytes, 1 byte or shorter than their first page, each required to be refused as a
    /// damaged store (never opened as a new, empty one) and left as it is.
    public var truncatedStoreFiles = 0
    /// Store files (the database, its write-ahead log, its shared-memory index) replaced by a symbolic link,
    /// each required to be refused (never followed) and left as it is.
    public var linkedStoreFiles = 0
    /// Store files replaced by a FIFO, each required to be refused at once (never opened) and left as it is.
    public var fifoStoreFiles = 0
    /// Damaged files restored (`damage FILE restore`), after which the run goes on from them.
    public var restoredFiles = 0
    /// Boots from a restored keybag or state file, each checked to find the failed-attempt count kept.
    public var bootsAfterRestore = 0

    /// An empty tally.
    public init() {}

    /// Counts a command and the error the model predicted for it (the run checked they agree).
    mutating func count(_ command: ScenarioCommand, expectedError: String?, wipedBefore: Bool) {
        if wipedBefore { stepsAfterWipe += 1 }
        if expectedError == "passcode-delay" { passcodeDelays += 1 }
        // A wrong passcode ends in wrong-passcode, or in device-wiped when it is the one that erases.
        let wrongPasscode = expectedError == "wrong-passcode" || (expectedError == "device-wiped" && !wipedBefore)
        if wrongPasscode, expectedError == "device-wiped" { wipes += 1 }
        switch command {
        case .deviceChangePasscode:
            if expectedError == nil { passcodeChanges += 1 }
            if wrongPasscode { passcodeChangesRefused += 1 }
        case .deviceUnlock:
            if wrongPasscode { wrongUnlocks += 1 }
        case .inboxPut(_, let value, let kind, let otherProcess):
            if value.utf8.count > InboxRecord.maximumPayloadLength - 256 {
                largeInboxAppends += 1
                if expectedError == "inbox-record-too-large" { largeInboxRefused += 1 }
            }
            guard expectedError == nil else { break }
            if kind != nil { unknownKindRecords += 1 }
            if otherProcess { otherProcessAppends += 1 }
        case .put(_, let value):
            if value.utf8.count > 1 << 20 { largePuts += 1 }
        default:
            break
        }
    }

    /// Counts a fault that fired inside `command`.
    mutating func countFault(_ fault: DiskFaultPlan.Fault, command: ScenarioCommand, failed: Bool) {
        switch fault {
        case .noSpace: faultsNoSpace += 1
        case .ioError: faultsIOError += 1
        case .shortWrite: faultsShortWrite += 1
        case .powerCut: faultsPowerCut += 1
        }
        if failed { faultedCommandsFailed += 1 }
        switch command {
        case .deviceUnlock: faultsInAttempts += 1
        case .deviceChangePasscode: faultsInPasscodeChanges += 1
        case .appLaunch: faultsInLaunches += 1
        case .put, .delete: faultsInWrites += 1
        case .inboxPut: faultsInAppends += 1
        default: break
        }
    }

    /// Counts a `damage` of a file other than the inbox, or its restore, that ran.
    mutating func countDamage(_ file: DamagedFile, _ damage: Damage) {
        switch (file, damage) {
        case (_, .restore): restoredFiles += 1
        case (.storeKey, _), (.inboxKey, _): damagedKeyFiles += 1
        case (.keybag, _): damagedKeybags += 1
        case (.deviceState, _): damagedDeviceStates += 1
        case (_, .link): linkedStoreFiles += 1
        case (_, .fifo): fifoStoreFiles += 1
        case (.store, _): truncatedStoreFiles += 1
        case (.inbox, _), (.storeLog, _), (.storeSharedMemory, _): break
        }
    }

    /// Counts what the store reported doing.
    mutating func count(_ journal: ArraySlice<ScenarioSession.JournalEntry>) {
        for entry in journal {
            switch entry {
            case .inboxMerged(_, let quarantined): self.quarantined += quarantined
            case .quarantineRetried: retries += 1
            case .quarantineDiscarded(_, let removed):
                discards += 1
                discardedRecords += removed
            case .read: readsChecked += 1
            case .applied, .ran: break
            }
        }
    }

    /// Adds another tally.
    public static func += (lhs: inout CoverageTally, rhs: CoverageTally) {
        lhs.passcodeChanges += rhs.passcodeChanges
        lhs.passcodeChangesRefused += rhs.passcodeChangesRefused
        lhs.wrongUnlocks += rhs.wrongUnlocks
        lhs.passcodeDelays += rhs.passcodeDelays
        lhs.wipes += rhs.wipes
        lhs.stepsAfterWipe += rhs.stepsAfterWipe
        lhs.unknownKindRecords += rhs.unknownKindRecords
        lhs.quarantined += rhs.quarantined
        lhs.retries += rhs.retries
        lhs.discards += rhs.discards
        lhs.discardedRecords += rhs.discardedRecords
        lhs.otherProcessAppends += rhs.otherProcessAppends
        lhs.largeInboxAppends += rhs.largeInboxAppends
        lhs.largeInboxRefused += rhs.largeInboxRefused
        lhs.largePuts += rhs.largePuts
        lhs.readsChecked += rhs.readsChecked
        lhs.faultsNoSpace += rhs.faultsNoSpace
        lhs.faultsIOError += rhs.faultsIOError
        lhs.faultsShortWrite += rhs.faultsShortWrite
        lhs.faultsPowerCut += rhs.faultsPowerCut
        lhs.faultsUnused += rhs.faultsUnused
        lhs.faultedCommandsFailed += rhs.faultedCommandsFailed
        lhs.faultsInAttempts += rhs.faultsInAttempts
        lhs.faultsInPasscodeChanges += rhs.faultsInPasscodeChanges
        lhs.faultsInLaunches += rhs.faultsInLaunches
        lhs.faultsInWrites += rhs.faultsInWrites
        lhs.faultsInAppends += rhs.faultsInAppends
        lhs.damagedRecords += rhs.damagedRecords
        lhs.intactRecordsAfterDamage += rhs.intactRecordsAfterDamage
        lhs.damagedKeyFiles += rhs.damagedKeyFiles
        lhs.damagedKeybags += rhs.damagedKeybags
        lhs.damagedDeviceStates += rhs.damagedDeviceStates
        lhs.truncatedStoreFiles += rhs.truncatedStoreFiles
        lhs.linkedStoreFiles += rhs.linkedStoreFiles
        lhs.fifoStoreFiles += rhs.fifoStoreFiles
        lhs.restoredFiles += rhs.restoredFiles
        lhs.bootsAfterRestore += rhs.bootsAfterRestore
    }

    /// The tally in lines of at most 100 columns, each `subject: N what, N what…` with no number but counts,
    /// so several processes' lines can be summed number by number (scripts/simulate-long.sh).
    public var summaryLines: [String] {
        [
            "passcodes: \(passcodeChanges) changed, \(passcodeChangesRefused) changes and \(wrongUnlocks) unlocks wrong, "
                + "\(passcodeDelays) delays",
            "wipes: \(wipes) devices erased, \(stepsAfterWipe) steps after checked: no key file back, nothing available",
            "quarantine: \(unknownKindRecords) unknown-kind records, \(quarantined) quarantined, \(retries) retries, "
                + "\(discards) discards of \(discardedRecords)",
            "inbox: \(otherProcessAppends) appends by another process, \(largeInboxAppends) at the record size limit "
                + "(\(largeInboxRefused) refused)",
            "values: \(readsChecked) gets compared with the model, \(largePuts) large puts (about four MiB)",
            "faults: \(faultsNoSpace) ENOSPC, \(faultsIOError) EIO, \(faultsShortWrite) short writes, \(faultsPowerCut) cuts "
                + "in commands; \(faultedCommandsFailed) failed, \(faultsUnused) unused",
            "faulted: \(faultsInAttempts) passcode attempts, \(faultsInPasscodeChanges) passcode changes, "
                + "\(faultsInLaunches) launches, \(faultsInWrites) store writes, \(faultsInAppends) inbox appends",
            "damage: \(damagedRecords) inbox records made unreadable, \(intactRecordsAfterDamage) intact ones beside them kept",
            "damaged: \(damagedKeyFiles) key files, \(damagedKeybags) keybags, \(damagedDeviceStates) device states kept as damaged, "
                + "\(restoredFiles) restored, \(bootsAfterRestore) boots after",
            "store files: \(truncatedStoreFiles) cut short, \(linkedStoreFiles) links and \(fifoStoreFiles) FIFOs put in their "
                + "place, each refused",
        ]
    }
}
