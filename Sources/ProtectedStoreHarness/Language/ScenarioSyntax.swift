import ProtectedStore
import SecureKeys

/// Every command of the language.
///
/// This is the table the parser reads a line's keywords against and the shell's `help` is written from.
///
/// The parser finds a line's command here by its keywords (a line that names none is an unknown command) and
/// then switches over this enum to read its arguments, so a command exists for the parser only as a case of
/// it; every case must say its arguments and what it does (``arguments``, ``summary``: switches without a
/// default), and ``ScenarioCommand/syntax`` names the case of every command. A command cannot be added to the
/// language without its help text, and `help` cannot fall behind the parser.
public enum ScenarioSyntax: Sendable, Hashable, CaseIterable {
    /// `device setup`, `device reboot`, `device power-cut`, `device lock`, `device unlock`,
    /// `device change-passcode`.
    case deviceSetup, deviceReboot, devicePowerCut, deviceLock, deviceUnlock, deviceChangePasscode
    /// `clock advance`.
    case clockAdvance
    /// `app launch`, `app terminate`, `app crash`.
    case appLaunch, appTerminate, appCrash
    /// `ui`, `put`, `get` and `delete`, what the app's UI does.
    case ui, put, get, delete
    /// `inbox put`, `inbox delete`, `inbox quarantine`, `inbox retry`, `inbox discard`.
    case inboxPut, inboxDelete, inboxQuarantine, inboxRetry, inboxDiscard
    /// `damage FILE HOW`.
    case damage
    /// `status`.
    case status
    /// `fault next-io`.
    case faultNextIO
    /// `expect protected-data`, `expect store`, `expect coordinator`, `expect interaction`, `expect queued`,
    /// `expect ran`.
    case expectProtectedData, expectStore, expectCoordinator, expectInteraction, expectQueued, expectRan
    /// `expect value`, `expect missing`, `expect error`, `expect presented-error`, `expect device`,
    /// `expect inbox`.
    case expectValue, expectMissing, expectError, expectPresentedError, expectDevice, expectInbox
    /// `expect quarantined`, `expect inbox-damaged`, `expect no-plaintext`, `expect integrity`.
    case expectQuarantined, expectInboxDamaged, expectNoPlaintext, expectIntegrity

    /// The words that name the command, as typed.
    ///
    /// For example `["device", "setup"]` or `["status"]`.
    public var keywords: [String] {
        switch self {
        case .deviceSetup: ["device", "setup"]
        case .deviceReboot: ["device", "reboot"]
        case .devicePowerCut: ["device", "power-cut"]
        case .deviceLock: ["device", "lock"]
        case .deviceUnlock: ["device", "unlock"]
        case .deviceChangePasscode: ["device", "change-passcode"]
        case .clockAdvance: ["clock", "advance"]
        case .appLaunch: ["app", "launch"]
        case .appTerminate: ["app", "terminate"]
        case .appCrash: ["app", "crash"]
        case .ui: ["ui"]
        case .put: ["put"]
        case .get: ["get"]
        case .delete: ["delete"]
        case .inboxPut: ["inbox", "put"]
        case .inboxDelete: ["inbox", "delete"]
        case .inboxQuarantine: ["inbox", "quarantine"]
        case .inboxRetry: ["inbox", "retry"]
        case .inboxDiscard: ["inbox", "discard"]
        case .damage: ["damage"]
        case .status: ["status"]
        case .faultNextIO: ["fault", "next-io"]
        case .expectProtectedData: ["expect", "protected-data"]
        case .expectStore: ["expect", "store"]
        case .expectCoordinator: ["expect", "coordinator"]
        case .expectInteraction: ["expect", "interaction"]
        case .expectQueued: ["expect", "queued"]
        case .expectRan: ["expect", "ran"]
        case .expectValue: ["expect", "value"]
        case .expectMissing: ["expect", "missing"]
        case .expectError: ["expect", "error"]
        case .expectPresentedError: ["expect", "presented-error"]
        case .expectDevice: ["expect", "device"]
        case .expectInbox: ["expect", "inbox"]
        case .expectQuarantined: ["expect", "quarantined"]
        case .expectInboxDamaged: ["expect", "inbox-damaged"]
        case .expectNoPlaintext: ["expect", "no-plaintext"]
        case .expectIntegrity: ["expect", "integrity"]
        }
    }

    /// What follows the keywords, as `help` shows it.
    ///
    /// `[--option VALUE]` is optional, `a|b` a choice, a word in capitals a value. Lists of words come from where the
    /// parser checks them.
    public var arguments: String {
        switch self {
        case .deviceSetup: "[--passcode P] [--grace 10s] [--wipe-after 10] [--allow-empty-passcode]"
        case .deviceReboot, .deviceLock, .appTerminate, .appCrash, .inboxQuarantine, .inboxRetry, .status,
            .expectNoPlaintext:
            ""
        case .devicePowerCut: "[--mode \(PowerCutMode.allCases.map(\.rawValue).joined(separator: "|"))] [--seed N]"
        case .deviceUnlock: "[--passcode P]"
        case .deviceChangePasscode: "[--old P] [--new Q] [--allow-empty-passcode]"
        case .clockAdvance: "DURATION"
        case .appLaunch:
            "[--background] [--reason \(LaunchOptions.Reason.allCases.map(\.rawValue).joined(separator: "|"))] "
                + "[--protection \(ProtectionClass.allCases.map(\.name).joined(separator: "|"))] [--attach-delay DURATION]"
        case .ui: "NAME"
        case .put, .expectValue: "KEY VALUE|--bytes N"
        case .get, .delete, .inboxDelete, .expectMissing: "KEY"
        case .inboxPut: "[--kind NAME] [--other-process] KEY VALUE|--bytes N"
        case .inboxDiscard: "ID|all"
        case .damage:
            DamagedFile.allCases.map(\.rawValue).joined(separator: "|")
                + " truncate-tail N | truncate N | byte OFFSET set VALUE | byte OFFSET flip | length OFFSET VALUE | link | fifo"
                + " | restore"
        case .faultNextIO:
            "ENOSPC|EIO|short-write|power-cut [--after N] [--persistent] [--mode M] [--seed S]"
        case .expectProtectedData: "available|unavailable"
        case .expectStore: ScenarioParser.storeStates.joined(separator: "|")
        case .expectCoordinator: "assigned|nil"
        case .expectInteraction: "enabled|disabled"
        case .expectQueued, .expectInbox, .expectQuarantined: "N"
        case .expectRan: "[NAME...]"
        case .expectError, .expectPresentedError: "CODE|none"
        case .expectDevice: ScenarioParser.deviceStates.joined(separator: "|")
        case .expectInboxDamaged: "BYTES"
        case .expectIntegrity: "ok"
        }
    }

    /// What the command does, in a line.
    public var summary: String {
        switch self {
        case .deviceSetup:
            "Sets up the device (refused if there is one). Without --passcode, at a terminal, the passcode is "
                + "asked for twice, not echoed. --wipe-after: failed attempts before the device wipes itself."
        case .deviceReboot: "Powers off (every key in memory zeroed, the app killed) and boots before the first unlock."
        case .devicePowerCut:
            "The power goes: the disk keeps what was synced (and, by the mode, some of what was not); the device "
                + "boots before the first unlock."
        case .deviceLock: "Locks the device now; the grace period starts."
        case .deviceUnlock: "Unlocks the device. Without --passcode, at a terminal, the passcode is asked for, not echoed."
        case .deviceChangePasscode:
            "Changes the passcode. A passcode left out is asked for at a terminal (the new one twice), not echoed."
        case .clockAdvance: "Moves the virtual clock (500ms, 10s, 5m, 1h); timers that fall due fire."
        case .appLaunch: "Launches the app, in the foreground unless --background or a reason other than user."
        case .appTerminate: "The app exits cleanly (store closed, waiting work cancelled)."
        case .appCrash: "The app's process is killed; nothing is cleaned up."
        case .ui: "A UI operation that records its name when it runs."
        case .put: "Writes a value through the store (--bytes N: a value of N bytes)."
        case .get: "Reads a value and prints it."
        case .delete: "Removes a value."
        case .inboxPut:
            "A write while locked: sealed now, merged at the next attach. --kind: a change the app defines (one this "
                + "tool's app cannot apply is quarantined); --other-process: appended as an extension would."
        case .inboxDelete: "A removal while locked, sealed into the inbox."
        case .inboxQuarantine: "Lists the inbox records kept because they could not be applied."
        case .inboxRetry: "Tries to apply every quarantined record again."
        case .inboxDiscard: "Removes quarantined records for good: one by its id, or all."
        case .damage:
            "Damages a file in place (bit rot, a cut-short append) or puts a link or a FIFO in its place; restore "
                + "puts back what its last damage replaced."
        case .status: "Prints the device, the app and the store."
        case .faultNextIO:
            "The next command's file-system call N+1 fails (a full or failing disk, a power cut); --persistent: "
                + "and every later call."
        case .expectProtectedData: "The store's protection class is available, or not."
        case .expectStore: "The store's phase."
        case .expectCoordinator: "The store has a coordinator, or not."
        case .expectInteraction: "The UI is enabled, or not."
        case .expectQueued: "N operations wait."
        case .expectRan: "The ui operations that ran, in order."
        case .expectValue: "The attached store holds this value."
        case .expectMissing: "The attached store holds no value for the key."
        case .expectError: "The previous command's error code, or none."
        case .expectPresentedError: "The error presented to the user, or none."
        case .expectDevice: "The device's state."
        case .expectInbox: "N sealed records wait to be merged."
        case .expectQuarantined: "N inbox records are in the store's quarantine."
        case .expectInboxDamaged: "BYTES of the inbox were moved aside as damaged (never merged, never dropped)."
        case .expectNoPlaintext: "No file in the state directory holds a written value or SQLite's header."
        case .expectIntegrity: "PRAGMA integrity_check of the attached store answers ok."
        }
    }

    /// Whether a line of this command may hold a passcode.
    ///
    /// Such a line is never shown back nor kept (the shell's history leaves it out).
    public var holdsPasscode: Bool {
        switch self {
        case .deviceSetup, .deviceUnlock, .deviceChangePasscode: true
        default: false
        }
    }

    /// Whether a line of this command holds a value the app stores (`put`, `inbox put`, `expect value`).
    ///
    /// The shell's history leaves it out, as it leaves out a passcode line, so that no value reaches its file.
    public var holdsValue: Bool {
        switch self {
        case .put, .inboxPut, .expectValue: true
        default: false
        }
    }

    /// The command as `help` shows it, its keywords then its ``arguments``.
    public var usage: String {
        (keywords + (arguments.isEmpty ? [] : [arguments])).joined(separator: " ")
    }

    /// The first keywords, in the table's order, each once.
    ///
    /// They are `device`, `clock`, `app`, …
    public static let verbs: [String] = allCases.reduce(into: []) { verbs, syntax in
        if !verbs.contains(syntax.keywords[0]) { verbs.append(syntax.keywords[0]) }
    }

    /// Finds the command a line names.
    ///
    /// It reads the line's first word, and for a command of two keywords the first of `arguments`, which it takes.
    /// Sets the name messages use (`arguments.command`) to the keywords.
    ///
    /// The words are compared in place and never made into strings: a line that names no command may be a
    /// passcode typed at the wrong prompt, so it is neither copied into memory nobody wipes nor repeated in the
    /// error.
    ///
    /// - Throws: ``ScenarioParseError`` for a verb or an action the table does not have, or a missing action,
    ///   listing what there is.
    static func find(first word: ScenarioWord, in arguments: inout Arguments) throws -> ScenarioSyntax {
        guard let verb = verbs.first(where: { word.is($0) }) else {
            throw ScenarioParseError(
                message: "unknown command (not shown: it may be a passcode typed at the wrong prompt); the commands are "
                    + verbs.joined(separator: ", "))
        }
        arguments.command = verb
        let family = allCases.filter { $0.keywords[0] == verb }
        let first = family[0]
        if family.count == 1, first.keywords.count == 1 { return first }
        let actions = family.map { $0.keywords[1] }
        let what = verb == "expect" ? "what to expect" : "an action"
        let action = try arguments.positionalWord("\(what) (\(actions.joined(separator: ", ")))")
        guard let syntax = family.first(where: { action.is($0.keywords[1]) }) else {
            // Not repeated either, for the same reason as an unknown command.
            let name = verb == "expect" ? "expectation" : "\(verb) action"
            throw ScenarioParseError(message: "unknown \(name) (not shown); the choices are \(actions.joined(separator: ", "))")
        }
        arguments.command = syntax.keywords.joined(separator: " ")
        return syntax
    }

    /// The whole language, as the shell's `help` prints it.
    ///
    /// It lists one command after another (its usage, then what it does, indented), wrapped to `width` columns, then
    /// how values are quoted.
    public static func help(width: Int = 80) -> String {
        var lines: [String] = []
        var group = ""
        for syntax in allCases {
            // A blank line between families (`device …`, `app …`); the commands of one word go together.
            let family = syntax.keywords.count == 1 ? "" : syntax.keywords[0]
            if family != group, !lines.isEmpty { lines.append("") }
            group = family
            lines += wrap(syntax.usage, width: width, indent: "", continuation: "      ")
            lines += wrap(syntax.summary, width: width, indent: "    ", continuation: "    ")
        }
        lines.append("")
        lines += wrap(
            #""a value" in quotes keeps spaces and #, with the escapes "# + ScenarioQuoting.escapeList
                + "; # outside quotes starts a comment.",
            width: width, indent: "", continuation: "")
        return lines.joined(separator: "\n")
    }

    /// `text` in lines of at most `width` columns, broken at spaces but not inside brackets, so that an option
    /// stays with its value (a longer piece stands alone on its line).
    static func wrap(_ text: String, width: Int, indent: String, continuation: String) -> [String] {
        var pieces: [String] = []
        var depth = 0
        for word in text.split(separator: " ", omittingEmptySubsequences: true) {
            if depth > 0, let last = pieces.popLast() { pieces.append(last + " " + word) } else { pieces.append(String(word)) }
            depth += word.filter { $0 == "[" }.count - word.filter { $0 == "]" }.count
        }
        var lines: [String] = []
        var line = indent
        var lineIsEmpty = true
        for word in pieces {
            if !lineIsEmpty, line.count + 1 + word.count > width {
                lines.append(line)
                line = continuation
                lineIsEmpty = true
            }
            line += (lineIsEmpty ? "" : " ") + word
            lineIsEmpty = false
        }
        if !lineIsEmpty { lines.append(line) }
        return lines
    }
}

extension ScenarioCommand {
    /// The command's entry in the table of commands.
    public var syntax: ScenarioSyntax {
        switch self {
        case .deviceSetup: .deviceSetup
        case .deviceReboot: .deviceReboot
        case .devicePowerCut: .devicePowerCut
        case .deviceLock: .deviceLock
        case .deviceUnlock: .deviceUnlock
        case .deviceChangePasscode: .deviceChangePasscode
        case .clockAdvance: .clockAdvance
        case .appLaunch: .appLaunch
        case .appTerminate: .appTerminate
        case .appCrash: .appCrash
        case .ui: .ui
        case .put: .put
        case .get: .get
        case .delete: .delete
        case .inboxPut: .inboxPut
        case .inboxDelete: .inboxDelete
        case .inboxQuarantine: .inboxQuarantine
        case .inboxRetry: .inboxRetry
        case .inboxDiscard: .inboxDiscard
        case .damage: .damage
        case .status: .status
        case .faultNextIO: .faultNextIO
        case .expect(let expectation):
            switch expectation {
            case .protectedData: .expectProtectedData
            case .store: .expectStore
            case .coordinator: .expectCoordinator
            case .interaction: .expectInteraction
            case .queued: .expectQueued
            case .ran: .expectRan
            case .value: .expectValue
            case .missing: .expectMissing
            case .error: .expectError
            case .presentedError: .expectPresentedError
            case .device: .expectDevice
            case .inbox: .expectInbox
            case .quarantined: .expectQuarantined
            case .inboxDamaged: .expectInboxDamaged
            case .noPlaintext: .expectNoPlaintext
            case .integrityOK: .expectIntegrity
            }
        }
    }
}
