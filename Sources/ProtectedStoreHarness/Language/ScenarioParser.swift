import ProtectedStore
import ProtectedData
public import SecureKeys

/// A line the parser could not read.
///
/// It says what is wrong with it, in words, and where when a column can be named.
public struct ScenarioParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong with the line. A quote or escape error names its ``column`` rather than repeat the text,
    /// which may hold a passcode.
    public let message: String
    /// Where on the line the problem is, from 1, in Unicode scalars (`nil` when the line as a whole is wrong).
    public let column: Int?

    /// - Parameters:
    ///   - message: what is wrong; the words of the line it quotes are shown with their control characters
    ///     escaped (``ScenarioQuoting/escapingControlCharacters(_:)``), so that quoting them cannot move the
    ///     cursor of the terminal that shows the message.
    ///   - column: where on the line, when a column can be named.
    init(message: String, column: Int? = nil) {
        self.message = ScenarioQuoting.escapingControlCharacters(message)
        self.column = column
    }

    /// `column C: message`, or the ``message`` alone.
    public var description: String { column.map { "column \($0): \(message)" } ?? message }
}

/// Reads the command language.
///
/// The language has one command per line, `#` starts a comment, and double-quoted words hold any text with Swift's
/// escapes (`ScenarioTokenizer` reads the words, `ScenarioQuoting` writes them back).
public enum ScenarioParser: Sendable {
    /// The store states `expect store` accepts.
    public static let storeStates = ["launching", "waiting", "ready", "failed", "terminated", "not-running"]
    /// The device states `expect device` accepts.
    public static let deviceStates = ["unlocked", "locked", "grace-period", "before-first-unlock", "wiped", "none"]

    /// Parses one line.
    ///
    /// - Parameters:
    ///   - line: one line of the command language.
    ///   - passcodeMayBePrompted: in the interactive shell, `device setup`, `device unlock` and
    ///     `device change-passcode` without their passcodes ask for them with echo off; in scripts, and in a
    ///     shell that does not read a terminal, that is an error.
    /// - Returns: the command, or `nil` for a blank or comment-only line.
    /// - Throws: ``ScenarioParseError`` naming the problem.
    public static func parse(_ line: String, passcodeMayBePrompted: Bool = false) throws -> ScenarioCommand? {
        try parse(words: try ScenarioTokenizer.words(in: line), passcodeMayBePrompted: passcodeMayBePrompted)
    }

    /// Parses one line whose UTF-8 bytes are in guarded memory, as the shell reads them.
    ///
    /// Its passcodes go from there to guarded memory of their own (``ScenarioPasscode``), never through a `String`,
    /// and the words' text is in guarded memory while the line is parsed. The caller wipes `line` when it is done
    /// with it.
    ///
    /// - Parameters:
    ///   - line: one line of the command language, in UTF-8 (a byte that is not UTF-8 reads as U+FFFD).
    ///   - passcodeMayBePrompted: as in ``parse(_:passcodeMayBePrompted:)``.
    /// - Returns: the command, or `nil` for a blank or comment-only line.
    /// - Throws: ``ScenarioParseError`` naming the problem; `SecureKeysError` when `line` was wiped.
    public static func parse(utf8 line: SecureBytes, passcodeMayBePrompted: Bool = false) throws -> ScenarioCommand? {
        let words = try line.withUnsafeBytes { try ScenarioTokenizer.words(inUTF8: $0) }
        return try parse(words: words, passcodeMayBePrompted: passcodeMayBePrompted)
    }

    /// The command a line names, found by its keywords alone, its arguments unread.
    ///
    /// The shell asks this before keeping a line in its history, which never keeps a command that may hold a passcode
    /// (``ScenarioSyntax/holdsPasscode``).
    ///
    /// - Parameter line: one line of the command language, in UTF-8, in guarded memory.
    /// - Returns: `nil` for a blank or comment line, a line that cannot be read into words, or one whose words
    ///   name no command (which may be a passcode typed at the wrong prompt).
    public static func syntax(utf8 line: SecureBytes) -> ScenarioSyntax? {
        guard let words = try? line.withUnsafeBytes({ try ScenarioTokenizer.words(inUTF8: $0) }), let first = words.first
        else { return nil }
        var arguments = Arguments(words: Array(words.dropFirst()), command: "")
        return try? ScenarioSyntax.find(first: first, in: &arguments)
    }

    /// Parses one line whose UTF-8 bytes are `line`, where they are (a script in guarded memory), its words
    /// written into `arena` (see `ScenarioTokenizer/words(inUTF8:arena:)`).
    static func parse(utf8Bytes line: UnsafeRawBufferPointer, arena: SecureBytes) throws -> ScenarioCommand? {
        try parse(words: try ScenarioTokenizer.words(inUTF8: line, arena: arena), passcodeMayBePrompted: false)
    }

    /// Parses a line's words.
    ///
    /// It finds its command in the table of commands (``ScenarioSyntax``), then reads the command's arguments.
    private static func parse(words: [ScenarioWord], passcodeMayBePrompted: Bool) throws -> ScenarioCommand? {
        guard let first = words.first else { return nil }
        var arguments = Arguments(words: Array(words.dropFirst()), command: "")
        switch try ScenarioSyntax.find(first: first, in: &arguments) {
        case .deviceSetup:
            let allowEmpty = arguments.flag("--allow-empty-passcode")
            let passcode = try arguments.passcodeOption("--passcode", mayBePrompted: passcodeMayBePrompted)
            if passcode?.isEmpty == true, !allowEmpty { throw ScenarioParseError.emptyPasscode(arguments.command) }
            let grace = try arguments.durationOption("--grace") ?? .seconds(10)
            let wipeAfter = try arguments.integerOption("--wipe-after")
            // The device's own rules (DeviceRules), which it checks again for every caller: said here first,
            // before the script runs.
            do {
                try DeviceRules.checkGracePeriod(grace)
                try DeviceRules.checkWipeAfterFailures(wipeAfter)
            } catch {
                throw ScenarioParseError(message: "\(arguments.command): \(error.message)")
            }
            try arguments.finish()
            return .deviceSetup(passcode: passcode, grace: grace, wipeAfter: wipeAfter, allowEmptyPasscode: allowEmpty)
        case .deviceReboot:
            try arguments.finish()
            return .deviceReboot
        case .devicePowerCut:
            let modeText = try arguments.optionalOption("--mode") ?? PowerCutMode.drop.rawValue
            guard let mode = PowerCutMode(rawValue: modeText) else {
                throw ScenarioParseError(message: "device power-cut: unknown --mode '\(modeText)' (drop, torn-sequence, torn-op)")
            }
            let seedText = try arguments.optionalOption("--seed") ?? "0"
            guard let seed = UInt64(seedText) else {
                throw ScenarioParseError(message: "device power-cut: --seed takes a number from 0 to \(UInt64.max), got '\(seedText)'")
            }
            try arguments.finish()
            return .devicePowerCut(mode, seed: seed)
        case .deviceLock:
            try arguments.finish()
            return .deviceLock
        case .deviceUnlock:
            let passcode = try arguments.passcodeOption("--passcode", mayBePrompted: passcodeMayBePrompted)
            try arguments.finish()
            return .deviceUnlock(passcode: passcode)
        case .deviceChangePasscode:
            let allowEmpty = arguments.flag("--allow-empty-passcode")
            let old = try arguments.passcodeOption("--old", mayBePrompted: passcodeMayBePrompted)
            let new = try arguments.passcodeOption("--new", mayBePrompted: passcodeMayBePrompted)
            if new?.isEmpty == true, !allowEmpty { throw ScenarioParseError.emptyPasscode(arguments.command) }
            try arguments.finish()
            return .deviceChangePasscode(old: old, new: new, allowEmptyPasscode: allowEmpty)
        case .clockAdvance:
            let text = try arguments.positional("a duration (500ms, 10s, 5m, 1h)")
            guard let duration = DurationText.parse(text) else {
                throw ScenarioParseError(message: "bad duration '\(text)' (use 500ms, 10s, 5m, 1h)")
            }
            try arguments.finish()
            return .clockAdvance(duration)
        case .appLaunch:
            let background = arguments.flag("--background")
            let reasonText = try arguments.optionalOption("--reason") ?? (background ? "location" : "user")
            guard let reason = LaunchOptions.Reason(rawValue: reasonText) else {
                throw ScenarioParseError(message: "unknown launch reason '\(reasonText)' (user, location, remote-notification, background-fetch)")
            }
            var protection: ProtectionClass?
            if let text = try arguments.optionalOption("--protection") {
                guard let parsed = ProtectionClass(name: text) else {
                    throw ScenarioParseError(message: "unknown protection class '\(text)' (complete, complete-unless-open, until-first-unlock, none)")
                }
                protection = parsed
            }
            let attachDelay = try arguments.durationOption("--attach-delay") ?? .zero
            try arguments.finish()
            return .appLaunch(
                LaunchOptions(reason: reason, inBackground: background || reason != .user), protection: protection,
                attachDelay: attachDelay)
        case .appTerminate:
            try arguments.finish()
            return .appTerminate
        case .appCrash:
            try arguments.finish()
            return .appCrash
        case .ui:
            let name = try arguments.positional("an operation name")
            try arguments.finish()
            return .ui(name)
        case .put:
            let key = try arguments.positional("a key")
            return .put(key: key, value: try arguments.value())
        case .get:
            let key = try arguments.positional("a key")
            try arguments.finish()
            return .get(key: key)
        case .delete:
            let key = try arguments.positional("a key")
            try arguments.finish()
            return .delete(key: key)
        case .inboxPut:
            let kind = try arguments.optionalOption("--kind")
            let otherProcess = arguments.flag("--other-process")
            let key = try arguments.positional("a key")
            return .inboxPut(key: key, value: try arguments.value(), kind: kind, otherProcess: otherProcess)
        case .inboxDelete:
            let key = try arguments.positional("a key")
            try arguments.finish()
            return .inboxDelete(key: key)
        case .inboxQuarantine:
            try arguments.finish()
            return .inboxQuarantine
        case .inboxRetry:
            try arguments.finish()
            return .inboxRetry
        case .inboxDiscard:
            // `all` is the keyword; `"all"` (quoted, so a value) would be a record id of that name.
            let which = try arguments.positionalWord("a record id (hex) or 'all'")
            try arguments.finish()
            return .inboxDiscard(which.is("all") ? nil : which.text)
        case .damage:
            return try parseDamage(&arguments)
        case .status:
            try arguments.finish()
            return .status
        case .faultNextIO:
            return .faultNextIO(try parseFault(&arguments))
        case .expectProtectedData:
            return .expect(.protectedData(available: try oneOf(["available", "unavailable"], &arguments) == "available"))
        case .expectStore: return .expect(.store(try oneOf(storeStates, &arguments)))
        case .expectCoordinator: return .expect(.coordinator(assigned: try oneOf(["assigned", "nil"], &arguments) == "assigned"))
        case .expectInteraction: return .expect(.interaction(enabled: try oneOf(["enabled", "disabled"], &arguments) == "enabled"))
        case .expectDevice: return .expect(.device(try oneOf(deviceStates, &arguments)))
        case .expectQueued: return .expect(.queued(try count(&arguments)))
        case .expectInbox: return .expect(.inbox(try count(&arguments)))
        case .expectQuarantined: return .expect(.quarantined(try count(&arguments)))
        case .expectInboxDamaged: return .expect(.inboxDamaged(try count(&arguments)))
        case .expectRan:
            return .expect(.ran(arguments.remainingWords()))
        case .expectValue:
            let key = try arguments.positional("a key")
            return .expect(.value(key: key, value: try arguments.value()))
        case .expectMissing:
            let key = try arguments.positional("a key")
            try arguments.finish()
            return .expect(.missing(key: key))
        case .expectNoPlaintext:
            try arguments.finish()
            return .expect(.noPlaintext)
        case .expectIntegrity:
            _ = try oneOf(["ok"], &arguments)
            return .expect(.integrityOK)
        case .expectError:
            let code = try arguments.positional("an error code, or none")
            try arguments.finish()
            return .expect(.error(code))
        case .expectPresentedError:
            let code = try arguments.positional("none or an error code")
            try arguments.finish()
            return .expect(.presentedError(code))
        }
    }

    /// The one word of `choices` an `expect` line ends with.
    private static func oneOf(_ choices: [String], _ arguments: inout Arguments) throws -> String {
        let word = try arguments.positional(choices.joined(separator: "|"))
        guard choices.contains(word) else {
            throw ScenarioParseError(message: "\(arguments.command): '\(word)' is not one of \(choices.joined(separator: ", "))")
        }
        try arguments.finish()
        return word
    }

    /// The count, 0 or more, an `expect` line ends with.
    private static func count(_ arguments: inout Arguments) throws -> Int {
        let text = try arguments.positional("a number")
        guard let count = Int(text), count >= 0 else { throw ScenarioParseError(message: "\(arguments.command): '\(text)' is not a number") }
        try arguments.finish()
        return count
    }

    /// `fault next-io ENOSPC|EIO|short-write|power-cut [--after N] [--persistent] [--mode M] [--seed S]`.
    private static func parseFault(_ arguments: inout Arguments) throws -> ScenarioFault {
        let word = try arguments.positional("a fault: ENOSPC, EIO, short-write or power-cut")
        let after = try arguments.integerOption("--after") ?? 0
        guard after >= 0 else { throw ScenarioParseError(message: "fault next-io: --after takes a number of calls, 0 or more, got \(after)") }
        let persistent = arguments.flag("--persistent")
        let modeText = try arguments.optionalOption("--mode")
        let seedText = try arguments.optionalOption("--seed")
        let kind: ScenarioFault.Kind
        switch word {
        case "ENOSPC": kind = .noSpace
        case "EIO": kind = .ioError
        case "short-write": kind = .shortWrite
        case "power-cut":
            let modeWord = modeText ?? PowerCutMode.drop.rawValue
            guard let mode = PowerCutMode(rawValue: modeWord) else {
                throw ScenarioParseError(message: "fault next-io power-cut: unknown --mode '\(modeWord)' (drop, torn-sequence, torn-op)")
            }
            guard let seed = UInt64(seedText ?? "0") else {
                throw ScenarioParseError(message: "fault next-io power-cut: --seed takes a number from 0 to \(UInt64.max), got '\(seedText ?? "")'")
            }
            kind = .powerCut(mode, seed: seed)
        default:
            throw ScenarioParseError(message: "fault next-io: unknown fault '\(word)' (ENOSPC, EIO, short-write, power-cut)")
        }
        if case .powerCut = kind {} else if modeText != nil || seedText != nil {
            throw ScenarioParseError(message: "fault next-io: --mode and --seed are for power-cut only")
        }
        try arguments.finish()
        return ScenarioFault(kind, after: after, persistent: persistent)
    }

    /// `damage FILE truncate-tail N | truncate N | byte OFFSET set VALUE | byte OFFSET flip | length OFFSET VALUE |
    /// link | fifo | restore`.
    private static func parseDamage(_ arguments: inout Arguments) throws -> ScenarioCommand {
        let files = DamagedFile.allCases.map(\.rawValue).joined(separator: ", ")
        let name = try arguments.positional("a file to damage (\(files))")
        guard let file = DamagedFile(rawValue: name) else {
            throw ScenarioParseError(message: "damage: unknown file '\(name)' (\(files))")
        }
        let how = try arguments.positional("how: truncate-tail, truncate, byte, length, link, fifo or restore")
        arguments.command = "damage \(name) \(how)"
        func number(_ what: String, max: UInt64 = UInt64(Int.max)) throws -> UInt64 {
            let text = try arguments.positional(what)
            let value = text.lowercased().hasPrefix("0x") ? UInt64(text.dropFirst(2), radix: 16) : UInt64(text)
            guard let value, value <= max else {
                throw ScenarioParseError(message: "\(arguments.command): '\(text)' is not \(what) (0 to \(max), decimal or 0x hex)")
            }
            return value
        }
        let damage: Damage
        switch how {
        case "truncate-tail":
            damage = .truncateTail(Int(try number("a byte count")))
        case "byte":
            let offset = Int(try number("a byte offset"))
            let action = try arguments.positional("set VALUE or flip")
            switch action {
            case "set": damage = .setByte(offset: offset, value: UInt8(try number("a byte value", max: 255)))
            case "flip": damage = .flipByte(offset: offset)
            default: throw ScenarioParseError(message: "\(arguments.command): unknown action '\(action)' (set VALUE, flip)")
            }
        case "length":
            let offset = Int(try number("a record's byte offset"))
            damage = .setLength(recordAt: offset, value: UInt32(try number("a length", max: UInt64(UInt32.max))))
        case "truncate":
            damage = .truncate(Int(try number("a length")))
        case "link":
            damage = .link
        case "fifo":
            damage = .fifo
        case "restore":
            damage = .restore
        default:
            throw ScenarioParseError(
                message: "damage: unknown damage '\(how)' (truncate-tail N, truncate N, byte OFFSET set VALUE, byte OFFSET flip, length OFFSET VALUE, link, fifo, restore)")
        }
        try arguments.finish()
        return .damage(file, damage)
    }
}
