/// How a word is written in the command language, in one place.
///
/// It holds the escapes a double-quoted word may hold (which `ScenarioTokenizer` reads) and how a word is written
/// back into script text (``ScenarioCommand/scriptLine``, for minimized simulator scripts and `simulate --trace`), so
/// that every command renders to text that parses back to the same command.
///
/// A word is written bare when the tokenizer would read it back unchanged and as a value; otherwise it is
/// written in double quotes, with Swift's escapes for what cannot appear as itself on one line of a script.
public enum ScenarioQuoting: Sendable {
    /// The one-character escapes.
    ///
    /// Each is the character after the backslash, and the scalar it stands for.
    static let escapes: [(letter: Unicode.Scalar, scalar: Unicode.Scalar)] = [
        ("n", "\n"), ("t", "\t"), ("r", "\r"), ("0", "\0"), ("\\", "\\"), ("\"", "\""),
    ]

    /// The escapes as an error message lists them.
    static let escapeList = #"\n \t \r \0 \\ \" \u{1F600}"#

    /// The scalar `\letter` stands for, or `nil` when it is no escape (`\u{…}` is read apart).
    static func scalar(escapedBy letter: Unicode.Scalar) -> Unicode.Scalar? {
        escapes.first { $0.letter == letter }?.scalar
    }

    /// `word` as script text.
    ///
    /// It is bare when it reads back as itself, quoted and escaped otherwise.
    static func render(_ word: String) -> String {
        if isBare(word) { return word }
        var text = "\""
        for scalar in word.unicodeScalars {
            if let escape = escapes.first(where: { $0.scalar == scalar }) {
                text += "\\" + String(Character(escape.letter))
            } else if needsHexEscape(scalar) {
                text += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                text.unicodeScalars.append(scalar)
            }
        }
        return text + "\""
    }

    /// Whether the tokenizer reads `word`, written as it is, back as the same single value.
    ///
    /// That needs a word that is not empty, with no white space, no `"`, `#` or `\`, no control character, and not
    /// starting with `--` (which would read as a flag). Checked scalar by scalar, as the tokenizer reads.
    static func isBare(_ word: String) -> Bool {
        !word.isEmpty && !word.hasPrefix("--")
            && word.unicodeScalars.allSatisfy {
                !$0.properties.isWhitespace && $0 != "\"" && $0 != "#" && $0 != "\\" && !needsHexEscape($0)
            }
    }

    /// `text` with its control characters escaped, for a message that repeats what was typed.
    ///
    /// Every control character (C0 such as ESC, DEL, C1) and every line or paragraph separator is written as
    /// `\u{1B}`, the escape a quoted word takes. An arrow key's escape sequence echoed raw would move the cursor and
    /// scramble the prompt.
    ///
    /// - Parameter text: a message that may quote input.
    /// - Returns: `text` when it has none of them, else the escaped text.
    public static func escapingControlCharacters(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                escaped += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// A control character, or a line or paragraph separator.
    ///
    /// A terminal does not show these as themselves.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: true
        default: false
        }
    }

    /// Scalars written as `\u{…}` inside quotes.
    ///
    /// They are control characters, and white space other than the space, so that a rendered line is one printable
    /// line whose every character can be seen (a no-break space, a line separator or a bare carriage return would
    /// otherwise hide in it).
    private static func needsHexEscape(_ scalar: Unicode.Scalar) -> Bool {
        if scalar == " " { return false }
        switch scalar.properties.generalCategory {
        case .control, .lineSeparator, .paragraphSeparator: return true
        default: return scalar.properties.isWhitespace
        }
    }
}

/// A word as the tokenizer reads it back.
///
/// It is ``ScenarioQuoting/render(_:)``, the one rendering every command uses.
func quoted(_ word: String) -> String { ScenarioQuoting.render(word) }
