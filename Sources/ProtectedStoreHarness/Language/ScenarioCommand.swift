public import ProtectedStore
import ProtectedData

/// One line of the command language that `protected-store shell` and scenario scripts share.
public enum ScenarioCommand: Sendable, Hashable {
    /// `device setup --passcode P [--grace D] [--wipe-after N] [--allow-empty-passcode]`.
    ///
    /// `passcode` is `nil` in the shell when it is to be read from the terminal with echo off; an empty passcode is
    /// refused unless `allowEmptyPasscode` says it was asked for. Passcodes are kept in guarded memory
    /// (``ScenarioPasscode``).
    case deviceSetup(passcode: ScenarioPasscode?, grace: Duration, wipeAfter: Int?, allowEmptyPasscode: Bool = false)
    /// `device reboot` powers off and boots before the first unlock.
    ///
    /// Powering off zeroes every key in memory and kills the app.
    case deviceReboot
    /// `device power-cut [--mode drop|torn-sequence|torn-op] [--seed N]` cuts the power.
    ///
    /// The disk keeps only what was synced (and, by the mode, some of what was not; `seed` picks which). Then the
    /// device boots before the first unlock and the app is gone, as after a reboot.
    case devicePowerCut(PowerCutMode, seed: UInt64)
    /// `device lock` locks the device now.
    ///
    /// The grace period starts.
    case deviceLock
    /// `device unlock --passcode P`. `passcode` is `nil` in the shell when it is to be read from the terminal
    /// with echo off.
    case deviceUnlock(passcode: ScenarioPasscode?)
    /// `device change-passcode --old P --new Q [--allow-empty-passcode]`.
    ///
    /// Either passcode is `nil` in the shell when it is to be read from the terminal with echo off; an empty new
    /// passcode is refused unless `allowEmptyPasscode` says it was asked for.
    case deviceChangePasscode(old: ScenarioPasscode?, new: ScenarioPasscode?, allowEmptyPasscode: Bool = false)
    /// `clock advance DURATION` moves the virtual clock.
    ///
    /// Timers that become due fire.
    case clockAdvance(Duration)
    /// `app launch [--background] [--reason R] [--protection P] [--attach-delay D]`.
    case appLaunch(LaunchOptions, protection: ProtectionClass?, attachDelay: Duration)
    /// `app terminate` makes the app exit cleanly.
    ///
    /// The store is closed and waiting work cancelled.
    case appTerminate
    /// `app crash` kills the app's process.
    ///
    /// Nothing is cleaned up.
    case appCrash
    /// `ui NAME`, a UI-facing operation that records its name when it runs.
    case ui(String)
    /// `put KEY VALUE|--bytes N`, a UI-facing write.
    case put(key: String, value: String)
    /// `get KEY`, a UI-facing read that prints the value.
    case get(key: String)
    /// `delete KEY`, a UI-facing removal.
    case delete(key: String)
    /// `inbox put [--kind NAME] [--other-process] KEY VALUE`, a write sealed into the locked inbox.
    ///
    /// The inbox works while the store is locked. A kind other than `put` is an app-defined change this tool's app
    /// cannot apply (it is quarantined). With `--other-process` the record is appended as another process (an
    /// extension) would, through the inbox file alone: a running app merges it at its next poll, not at once.
    case inboxPut(key: String, value: String, kind: String? = nil, otherProcess: Bool = false)
    /// `inbox delete KEY`, a removal sealed into the locked inbox.
    case inboxDelete(key: String)
    /// `inbox quarantine` lists the inbox records the store keeps because they could not be applied.
    case inboxQuarantine
    /// `inbox retry` tries to apply every quarantined record again.
    case inboxRetry
    /// `inbox discard ID|all` removes quarantined records for good.
    ///
    /// `nil` means all of them.
    case inboxDiscard(String?)
    /// `damage FILE HOW` damages one of the state directory's files in place, durably.
    ///
    /// It stands for bit rot, an append cut short or another program, so scripts and the simulator can check that the
    /// damage is reported and nothing intact is lost. `damage FILE restore` puts back what the last damage of the
    /// file replaced, as a user restoring the file from a backup would.
    case damage(DamagedFile, Damage)
    /// `status` prints the device, the app and the store.
    case status
    /// `fault next-io ENOSPC|EIO|short-write|power-cut [--after N] [--persistent] [--mode M] [--seed S]` plans a
    /// fault.
    ///
    /// One file-system call of the next command fails (see ``ScenarioFault``).
    case faultNextIO(ScenarioFault)
    /// `expect …` checks a fact.
    ///
    /// A script fails when it does not hold.
    case expect(Expectation)

    /// Whether the command plans a fault for the next one (it runs under no plan itself).
    var isFault: Bool {
        if case .faultNextIO = self { return true }
        return false
    }

    /// Whether the command is a `device power-cut`.
    var isPowerCut: Bool {
        if case .devicePowerCut = self { return true }
        return false
    }

    /// Whether the line hides a secret and must not be echoed or logged as typed.
    public var containsPasscode: Bool { syntax.holdsPasscode }
}

/// A file `damage` can damage.
///
/// The script's word for it is its raw value. Add a case (and where it lives, in `ScenarioSession.path(of:)`) for
/// each new file.
public enum DamagedFile: String, Sendable, Hashable, CaseIterable {
    /// The store's locked inbox (`<store>.inbox`).
    case inbox
    /// The store's key file (`<store>.key`).
    ///
    /// It holds the store's database key, wrapped under its class key.
    case storeKey = "store-key"
    /// The inbox's key file (`<store>.inbox-key`), which an attach creates.
    case inboxKey = "inbox-key"
    /// The device's keybag (`device/device.keybag`).
    ///
    /// It holds the class keys, wrapped under the passcode and device key.
    case keybag
    /// The device's state file (`device/state.json`).
    ///
    /// It holds the settings and the failed-attempt count, authenticated.
    case deviceState = "device-state"
    /// The store's database file (`<store>`).
    case store
    /// SQLite's write-ahead log beside the store (`<store>-wal`).
    ///
    /// It need not exist to be replaced.
    case storeLog = "store-wal"
    /// SQLite's shared-memory index beside the store (`<store>-shm`).
    ///
    /// It need not exist to be replaced.
    case storeSharedMemory = "store-shm"

    /// Whether this is one of the store's own files, which an attach opens.
    ///
    /// These are the database and the side files SQLite opens. Damage to one is met by a launch, like damage to the
    /// store's key file.
    var isStoreFile: Bool { self == .store || self == .storeLog || self == .storeSharedMemory }
}

/// How `damage` damages a file.
public enum Damage: Sendable, Hashable {
    /// `truncate-tail N` cuts off the last `N` bytes, as an append cut short leaves a file.
    case truncateTail(Int)
    /// `byte OFFSET set VALUE` sets the byte at `OFFSET` to `VALUE`.
    ///
    /// `VALUE` is 0–255, written `0x41` or `65`.
    case setByte(offset: Int, value: UInt8)
    /// `byte OFFSET flip` inverts every bit of the byte at `OFFSET`.
    case flipByte(offset: Int)
    /// `length OFFSET VALUE` sets the length field of the inbox record at `OFFSET` to `VALUE`.
    ///
    /// The length field is the little-endian u32 at `OFFSET + 4`.
    case setLength(recordAt: Int, value: UInt32)
    /// `truncate N` cuts the file to `N` bytes.
    ///
    /// With `0` the file is emptied, as `: > FILE` does.
    case truncate(Int)
    /// `link` puts a symbolic link where the file was.
    ///
    /// The file is moved aside (to `FILE.aside`, when it exists) and the link points to that place.
    case link
    /// `fifo` puts a FIFO where the file was.
    ///
    /// The file is moved aside (to `FILE.aside`, when it exists).
    case fifo
    /// `restore` puts back the bytes the last damage of the file replaced.
    ///
    /// The file is as it was before that damage: a link or FIFO is removed and the file moved back, or none left when
    /// there was none. This is what a user restoring it from a backup would do. It is an error when the file was not
    /// damaged since its last restore.
    case restore

    /// The words after the file's name in a script.
    var scriptText: String {
        switch self {
        case .truncateTail(let count): "truncate-tail \(count)"
        case .setByte(let offset, let value): "byte \(offset) set \(value)"
        case .flipByte(let offset): "byte \(offset) flip"
        case .setLength(let offset, let value): "length \(offset) \(value)"
        case .truncate(let length): "truncate \(length)"
        case .link: "link"
        case .fifo: "fifo"
        case .restore: "restore"
        }
    }
}

/// What an `expect` line checks.
public enum Expectation: Sendable, Hashable {
    /// `expect protected-data available|unavailable` for the store's class.
    case protectedData(available: Bool)
    /// `expect store PHASE` (`launching`, `waiting`, `ready`, `failed`, `terminated`, `not-running`).
    case store(String)
    /// `expect coordinator assigned|nil`.
    case coordinator(assigned: Bool)
    /// `expect interaction enabled|disabled`.
    case interaction(enabled: Bool)
    /// `expect queued N`, the number of operations waiting.
    case queued(Int)
    /// `expect ran [A B …]`, the `ui` operations that ran, in order.
    case ran([String])
    /// `expect value KEY = VALUE`, read from the attached store.
    case value(key: String, value: String)
    /// `expect missing KEY`.
    case missing(key: String)
    /// `expect error CODE`, the previous command's error code, or `none`.
    case error(String)
    /// `expect presented-error CODE|none`.
    case presentedError(String)
    /// `expect device STATE` (`unlocked`, `locked`, `grace-period`, `before-first-unlock`, `wiped`).
    case device(String)
    /// `expect inbox N`, the number of sealed records waiting to be merged.
    case inbox(Int)
    /// `expect quarantined N`, the number of inbox records kept in the store's quarantine.
    case quarantined(Int)
    /// `expect inbox-damaged BYTES`, the bytes of the inbox moved to its damaged-bytes file.
    ///
    /// It counts bytes, not records; those bytes are never merged and never dropped.
    case inboxDamaged(Int)
    /// `expect no-plaintext` checks that no file in the state directory holds a written value or SQLite's header.
    case noPlaintext
    /// `PRAGMA integrity_check` of the attached store answers `ok` (every page read, so every HMAC checked).
    case integrityOK
}
