/// One word of a command line, as ``ScenarioTokenizer`` read it.
struct ScenarioWord: Sendable, Hashable {
    /// The word, escapes resolved and quotes removed.
    var text: String
    /// Whether it was written in double quotes: a quoted word is always a value, never a flag or a keyword
    /// (`"--key"` is the value `--key`, `"all"` the record id `all`).
    var isQuoted: Bool
    /// Where it starts on its line, from 1, in Unicode scalars.
    var column: Int

    /// An unquoted word starting with `--`: an option's or a flag's name.
    var isFlag: Bool { !isQuoted && text.hasPrefix("--") }

    /// Whether this is the unquoted keyword or flag `name`.
    func `is`(_ name: String) -> Bool { !isQuoted && text == name }
}

/// Splits one line of the command language into words.
///
/// - White space separates words; `#` outside double quotes starts a comment that runs to the end of the line.
/// - A double-quoted word is one word, white space and `#` included, with Swift's escapes: `\n`, `\t`, `\r`,
///   `\0`, `\\`, `\"` and `\u{1F600}` (one to eight hex digits naming a Unicode scalar). It stands apart: text
///   glued to either side of its quotes is an error, not a second word.
/// - A backslash outside quotes, an unknown escape and a quote left open are errors naming their column.
/// - A carriage return ending the line (a CRLF file) is dropped.
///
/// Works on Unicode scalars, not characters: a combining mark after a space or a quote would otherwise fuse with
/// it into one character that is neither, and a word written back by ``ScenarioQuoting`` would not read back the
/// same (found by the FuzzScenarioLanguage fuzz target). Error messages never repeat the line's text, which may
/// hold a passcode; they name the column instead.
enum ScenarioTokenizer {
    /// The words of `line`.
    ///
    /// - Throws: ``ScenarioParseError`` with the column of the problem.
    static func words(in line: String) throws -> [ScenarioWord] {
        var scalars = Array(line.unicodeScalars)
        if scalars.last == "\r" { scalars.removeLast() }
        var reader = Reader(scalars: scalars)
        var words: [ScenarioWord] = []
        while true {
            reader.skipWhiteSpace()
            guard let scalar = reader.peek(), scalar != "#" else { return words }
            words.append(scalar == "\"" ? try reader.quotedWord() : try reader.bareWord())
        }
    }

    /// A cursor over a line's scalars.
    private struct Reader {
        let scalars: [Unicode.Scalar]
        var index = 0

        /// The column of the scalar under the cursor, from 1.
        var column: Int { index + 1 }

        func peek() -> Unicode.Scalar? { index < scalars.count ? scalars[index] : nil }

        mutating func next() -> Unicode.Scalar? {
            defer { index += 1 }
            return peek()
        }

        mutating func skipWhiteSpace() {
            while let scalar = peek(), scalar.properties.isWhitespace { index += 1 }
        }

        /// Whether a word may end before `scalar`: at white space, a comment, or the end of the line.
        static func endsWord(_ scalar: Unicode.Scalar?) -> Bool {
            guard let scalar else { return true }
            return scalar.properties.isWhitespace || scalar == "#"
        }

        mutating func bareWord() throws -> ScenarioWord {
            let start = column
            var text = String.UnicodeScalarView()
            while !Self.endsWord(peek()), let scalar = peek() {
                switch scalar {
                case "\\":
                    throw ScenarioParseError(
                        message: #"a backslash outside double quotes: escapes work only in a quoted word, as in "a\nb" (write "\\" for a backslash)"#,
                        column: column)
                case "\"":
                    throw ScenarioParseError(
                        message: #"a quote in the middle of a word: quote the whole word, as in "a b""#, column: column)
                default:
                    text.append(scalar)
                    index += 1
                }
            }
            return ScenarioWord(text: String(text), isQuoted: false, column: start)
        }

        mutating func quotedWord() throws -> ScenarioWord {
            let start = column
            index += 1  // the opening quote
            var text = String.UnicodeScalarView()
            while true {
                let escapeColumn = column
                guard let scalar = next() else {
                    throw ScenarioParseError(message: #"unterminated quote: the word that starts here has no closing ""#, column: start)
                }
                if scalar == "\"" { break }
                guard scalar == "\\" else {
                    text.append(scalar)
                    continue
                }
                guard let letter = next() else {
                    throw ScenarioParseError(message: #"unterminated quote: the word that starts here has no closing ""#, column: start)
                }
                if letter == "u" {
                    text.append(try unicodeEscape(startingAt: escapeColumn))
                } else if let escaped = ScenarioQuoting.scalar(escapedBy: letter) {
                    text.append(escaped)
                } else {
                    throw ScenarioParseError(
                        message: "unknown escape: a backslash in a quoted word takes one of \(ScenarioQuoting.escapeList)",
                        column: escapeColumn)
                }
            }
            guard Self.endsWord(peek()) else {
                throw ScenarioParseError(message: "text right after a closing quote: put a space between two words", column: column)
            }
            return ScenarioWord(text: String(text), isQuoted: true, column: start)
        }

        /// The rest of `\u{…}` after the `u`: one to eight hex digits naming a Unicode scalar (not a surrogate).
        mutating func unicodeEscape(startingAt escapeColumn: Int) throws -> Unicode.Scalar {
            let malformed = ScenarioParseError(
                message: #"bad \u escape: write one to eight hex digits in braces, as in \u{1F600}"#, column: escapeColumn)
            guard next() == "{" else { throw malformed }
            var digits = ""
            while let scalar = next(), scalar != "}" {
                guard scalar.properties.isASCIIHexDigit, digits.count < 8 else { throw malformed }
                digits.unicodeScalars.append(scalar)
            }
            guard scalars.indices.contains(index - 1), scalars[index - 1] == "}", let value = UInt32(digits, radix: 16)
            else { throw malformed }
            guard let scalar = Unicode.Scalar(value) else {
                throw ScenarioParseError(
                    message: #"bad \u escape: \#(digits) is not a Unicode scalar (above 10FFFF, or a surrogate D800–DFFF)"#,
                    column: escapeColumn)
            }
            return scalar
        }
    }
}
