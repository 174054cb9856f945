/// The words after a command's verb.
///
/// Positional words come first, then `--option value` pairs and flags.
///
/// Only an unquoted word can be a flag or an option's name: `"--key"` is a value wherever it stands.
struct Arguments {
    var words: [ScenarioWord]
    /// The command as messages name it (`device setup`).
    var command: String
    /// Whether the line holds a passcode.
    ///
    /// Then no error repeats a word of it (an unquoted passcode with a space in it splits into a passcode and an
    /// "unexpected" word).
    private var holdsPasscode = false

    init(words: [ScenarioWord], command: String) {
        self.words = words
        self.command = command
    }

    mutating func positionalWord(_ what: String) throws -> ScenarioWord {
        guard let first = words.first, !first.isFlag else {
            throw ScenarioParseError(message: "\(command): missing \(what)")
        }
        words.removeFirst()
        return first
    }

    mutating func positional(_ what: String) throws -> String {
        try positionalWord(what).text
    }

    /// The rest of the line as one value.
    ///
    /// The words are joined by a space; a quoted word keeps its own spaces.
    mutating func rest(_ what: String) throws -> String {
        guard !words.isEmpty else { throw ScenarioParseError(message: "\(command): missing \(what)") }
        defer { words.removeAll() }
        return words.map(\.text).joined(separator: " ")
    }

    /// A value, the rest of the line or `--bytes N`.
    ///
    /// `--bytes N` gives N bytes of ``ScenarioValue/filled(_:)``, for values too long to write out, such as a 1 MiB
    /// one.
    mutating func value() throws -> String {
        if let first = words.first, first.is("--bytes") {
            words.removeFirst()
            let text = try positional("a byte count")
            guard let count = Int(text), count >= 0, count <= 64 << 20 else {
                throw ScenarioParseError(message: "\(command): '\(text)' is not a byte count (0 to 67108864)")
            }
            try finish()
            return ScenarioValue.filled(count)
        }
        return try rest("a value")
    }

    mutating func remainingWords() -> [String] {
        defer { words.removeAll() }
        return words.map(\.text)
    }

    mutating func flag(_ name: String) -> Bool {
        guard let index = words.firstIndex(where: { $0.is(name) }) else { return false }
        words.remove(at: index)
        return true
    }

    /// The value after `--name`, or `nil` when the option is not given.
    ///
    /// - Throws: when `--name` ends the line or is followed by another option (quote a value that starts with
    ///   `--`).
    mutating func optionalOption(_ name: String) throws -> String? {
        guard let index = words.firstIndex(where: { $0.is(name) }) else { return nil }
        guard index + 1 < words.count, !words[index + 1].isFlag else {
            throw ScenarioParseError(message: "\(command): \(name) needs a value (quote one that starts with --)")
        }
        let value = words[index + 1].text
        words.removeSubrange(index...index + 1)
        return value
    }

    /// A passcode option.
    ///
    /// It is required, unless the shell may ask for it at the terminal (then `nil` when absent). The passcode goes
    /// from the line's guarded memory to its own, never through a `String`.
    mutating func passcodeOption(_ name: String, mayBePrompted: Bool) throws -> ScenarioPasscode? {
        holdsPasscode = true
        if let index = words.firstIndex(where: { $0.is(name) }) {
            guard index + 1 < words.count, !words[index + 1].isFlag else {
                throw ScenarioParseError(message: "\(command): \(name) needs a value (quote one that starts with --)")
            }
            let passcode = try words[index + 1].passcode
            words.removeSubrange(index...index + 1)
            return passcode
        }
        if mayBePrompted { return nil }
        throw ScenarioParseError(
            message: "\(command): missing \(name) (the passcode is asked for only when the shell reads a terminal)")
    }

    mutating func durationOption(_ name: String) throws -> Duration? {
        if words.last?.is(name) == true { throw ScenarioParseError(message: "\(command): \(name) needs a duration") }
        guard let text = try optionalOption(name) else { return nil }
        guard let duration = DurationText.parse(text) else {
            throw ScenarioParseError(message: "\(command): bad duration '\(text)' for \(name) (use 500ms, 10s, 5m, 1h)")
        }
        return duration
    }

    mutating func integerOption(_ name: String) throws -> Int? {
        if words.last?.is(name) == true { throw ScenarioParseError(message: "\(command): \(name) needs a number") }
        guard let text = try optionalOption(name) else { return nil }
        guard let value = Int(text), value > 0 else {
            throw ScenarioParseError(message: "\(command): \(name) takes a positive number, got '\(text)'")
        }
        return value
    }

    /// Fails on anything left over, an unknown option or an extra word.
    func finish() throws {
        guard let extra = words.first else { return }
        if holdsPasscode && !extra.isFlag {
            throw ScenarioParseError(
                message: "\(command): an unexpected word (not shown: the line holds a passcode; quote a passcode that has spaces)")
        }
        if holdsPasscode {
            // `--passcode=1234`: the option is named, what follows its `=` (a passcode, most likely) is not.
            let (name, hadEquals) = extra.textBeforeEquals
            if hadEquals {
                throw ScenarioParseError(
                    message: "\(command): unknown option \(name)=… (the rest is not shown: the line holds a passcode; "
                        + "write \(name) VALUE, with a space)")
            }
        }
        throw ScenarioParseError(
            message: extra.isFlag ? "\(command): unknown option \(extra.text)" : "\(command): unexpected '\(extra.text)'")
    }
}
