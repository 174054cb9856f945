import SecureKeys
import Glibc

/// One word of a command line, as `ScenarioTokenizer` read it.
///
/// Its text is in guarded memory, shared by the line's words (a word may be a passcode): ``text`` makes a
/// `String` of it, for every word but a passcode, which ``passcode`` copies into guarded memory of its own.
/// ``isFlag`` and ``is(_:)`` read the bytes in place, so that looking for an option never makes a passcode
/// into a string.
struct ScenarioWord: Sendable {
    /// The unescaped text of every word of the line, one after the other.
    private let arena: SecureBytes
    /// Where this word's UTF-8 bytes are in ``arena``.
    private let range: Range<Int>
    /// Whether it was written in double quotes.
    ///
    /// A quoted word is always a value, never a flag or a keyword (`"--key"` is the value `--key`, `"all"` the record
    /// id `all`).
    let isQuoted: Bool
    /// Where it starts on its line, from 1, in Unicode scalars.
    let column: Int

    init(arena: SecureBytes, range: Range<Int>, isQuoted: Bool, column: Int) {
        self.arena = arena
        self.range = range
        self.isQuoted = isQuoted
        self.column = column
    }

    /// The word as text, escapes resolved and quotes removed.
    ///
    /// It is never used for a passcode (see ``passcode``).
    var text: String { withBytes { String(decoding: $0, as: UTF8.self) } }

    /// The word copied into guarded memory of its own, as a passcode.
    ///
    /// - Throws: `SecureKeysError` with `out-of-memory` when the guarded memory cannot be allocated.
    var passcode: ScenarioPasscode {
        get throws { ScenarioPasscode(bytes: try withBytes { bytes in Result { try SecureBytes(copying: bytes) } }.get()) }
    }

    /// An unquoted word starting with `--`, which is an option's or a flag's name.
    var isFlag: Bool {
        !isQuoted && withBytes { $0.count >= 2 && $0[0] == UInt8(ascii: "-") && $0[1] == UInt8(ascii: "-") }
    }

    /// The word up to its first `=` as text, and whether an `=` was there.
    ///
    /// `--passcode=1234` gives `--passcode` and `true`, so that a message can name the option without repeating what
    /// was glued to it.
    var textBeforeEquals: (text: String, hadEquals: Bool) {
        withBytes { bytes in
            let end = bytes.firstIndex(of: UInt8(ascii: "=")) ?? bytes.count
            return (String(decoding: UnsafeRawBufferPointer(rebasing: bytes[..<end]), as: UTF8.self), end < bytes.count)
        }
    }

    /// Whether this is the unquoted keyword or flag `name`.
    func `is`(_ name: String) -> Bool {
        guard !isQuoted else { return false }
        var name = name
        return name.withUTF8 { name in
            withBytes { word in
                word.count == name.count && (name.isEmpty || memcmp(word.baseAddress!, name.baseAddress!, name.count) == 0)
            }
        }
    }

    /// Calls `body` with the word's bytes. The arena lives as long as the word and nobody wipes it.
    private func withBytes<Result>(_ body: (UnsafeRawBufferPointer) -> Result) -> Result {
        let range = self.range
        do {
            return try arena.withUnsafeBytes { arena in
                body(UnsafeRawBufferPointer(start: range.isEmpty ? nil : arena.baseAddress! + range.lowerBound, count: range.count))
            }
        } catch {
            return body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }
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
///
/// Reads the line's UTF-8 bytes where they are (the shell's are in guarded memory), decoding one scalar at a
/// time (a byte that is not UTF-8 reads as U+FFFD, as `String(decoding:as:)` repairs it), and writes the words'
/// text into guarded memory: no copy of a line, which may hold a passcode, is left in an array or a string.
enum ScenarioTokenizer {
    /// The words of `line`.
    ///
    /// - Throws: ``ScenarioParseError`` with the column of the problem.
    static func words(in line: String) throws -> [ScenarioWord] {
        var line = line
        return try line.withUTF8 { try words(inUTF8: UnsafeRawBufferPointer($0)) }
    }

    /// The words of the line whose UTF-8 bytes are `line`.
    ///
    /// - Throws: ``ScenarioParseError`` with the column of the problem.
    static func words(inUTF8 line: UnsafeRawBufferPointer) throws -> [ScenarioWord] {
        try words(inUTF8: line, arena: try SecureBytes(count: arenaCount(forLineOf: line.count)))
    }

    /// How many bytes the words of a line of `count` bytes may take.
    ///
    /// They take at most 3 for each byte the line has. A scalar is as long as in the line, an escape is longer than
    /// what it stands for, and a byte that is not UTF-8 becomes U+FFFD (3 bytes).
    static func arenaCount(forLineOf count: Int) -> Int { 3 * count }

    /// The words of the line whose UTF-8 bytes are `line`.
    ///
    /// Their text is written at the start of `arena` (at least ``arenaCount(forLineOf:)`` bytes). A script reuses one
    /// arena for all its lines, and zeroes what a line wrote once its words are parsed.
    ///
    /// - Throws: ``ScenarioParseError`` with the column of the problem.
    static func words(inUTF8 line: UnsafeRawBufferPointer, arena: SecureBytes) throws -> [ScenarioWord] {
        precondition(arena.count >= arenaCount(forLineOf: line.count), "the arena is too small for the line")
        var end = line.count
        if end > 0, line[end - 1] == UInt8(ascii: "\r") { end -= 1 }
        var words: [(range: Range<Int>, isQuoted: Bool, column: Int)] = []
        try arena.withUnsafeMutableBytes { output in
            var reader = Reader(bytes: UnsafeRawBufferPointer(rebasing: line[..<end]), output: output)
            while true {
                reader.skipWhiteSpace()
                guard let scalar = reader.peek(), scalar != "#" else { return }
                words.append(scalar == "\"" ? try reader.quotedWord() : try reader.bareWord())
            }
        }
        return words.map { ScenarioWord(arena: arena, range: $0.range, isQuoted: $0.isQuoted, column: $0.column) }
    }

    /// A cursor over a line's bytes, read as scalars, and where the words' text goes.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        let output: UnsafeMutableRawBufferPointer
        /// The byte under the cursor.
        var index = 0
        /// How many bytes of ``output`` hold words.
        var written = 0
        /// The column of the scalar under the cursor, from 1.
        var column = 1

        init(bytes: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer) {
            self.bytes = bytes
            self.output = output
        }

        /// The scalar at byte `offset` and how many bytes it takes.
        ///
        /// It is U+FFFD for bytes that are not UTF-8.
        private func scalar(at offset: Int) -> (scalar: Unicode.Scalar, length: Int)? {
            guard offset < bytes.count else { return nil }
            let byte = bytes[offset]
            if byte < 0x80 { return (Unicode.Scalar(byte), 1) }
            return Self.decodeNonASCII(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
        }

        /// The scalar that starts `bytes` (its first byte is not ASCII) and its length.
        ///
        /// It is U+FFFD for bytes that are not UTF-8. It is kept apart from ``scalar(at:)``, whose ASCII path it
        /// would slow down.
        private static func decodeNonASCII(_ bytes: UnsafeRawBufferPointer) -> (scalar: Unicode.Scalar, length: Int)? {
            var iterator = bytes.makeIterator()
            var parser = Unicode.UTF8.ForwardParser()
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded): return (Unicode.UTF8.decode(encoded), encoded.count)
            case .error(let length): return ("\u{FFFD}", length)
            case .emptyInput: return nil
            }
        }

        func peek() -> Unicode.Scalar? { scalar(at: index)?.scalar }

        mutating func next() -> Unicode.Scalar? {
            guard let (scalar, length) = scalar(at: index) else {
                column += 1
                return nil
            }
            index += length
            column += 1
            return scalar
        }

        /// Appends `scalar` to the text of the word being read.
        mutating func append(_ scalar: Unicode.Scalar) {
            Unicode.UTF8.encode(scalar) { byte in
                output[written] = byte
                written += 1
            }
        }

        mutating func skipWhiteSpace() {
            while let scalar = peek(), scalar.properties.isWhitespace { _ = next() }
        }

        /// Whether a word may end before `scalar`.
        ///
        /// It may at white space, a comment, or the end of the line.
        static func endsWord(_ scalar: Unicode.Scalar?) -> Bool {
            guard let scalar else { return true }
            return scalar.properties.isWhitespace || scalar == "#"
        }

        mutating func bareWord() throws -> (range: Range<Int>, isQuoted: Bool, column: Int) {
            let start = column
            let first = written
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
                    append(scalar)
                    _ = next()
                }
            }
            return (first..<written, false, start)
        }

        mutating func quotedWord() throws -> (range: Range<Int>, isQuoted: Bool, column: Int) {
            let start = column
            let first = written
            _ = next()  // the opening quote
            while true {
                let escapeColumn = column
                guard let scalar = next() else {
                    throw ScenarioParseError(message: #"unterminated quote: the word that starts here has no closing ""#, column: start)
                }
                if scalar == "\"" { break }
                guard scalar == "\\" else {
                    append(scalar)
                    continue
                }
                guard let letter = next() else {
                    throw ScenarioParseError(message: #"unterminated quote: the word that starts here has no closing ""#, column: start)
                }
                if letter == "u" {
                    append(try unicodeEscape(startingAt: escapeColumn))
                } else if let escaped = ScenarioQuoting.scalar(escapedBy: letter) {
                    append(escaped)
                } else {
                    throw ScenarioParseError(
                        message: "unknown escape: a backslash in a quoted word takes one of \(ScenarioQuoting.escapeList)",
                        column: escapeColumn)
                }
            }
            guard Self.endsWord(peek()) else {
                throw ScenarioParseError(message: "text right after a closing quote: put a space between two words", column: column)
            }
            return (first..<written, true, start)
        }

        /// The rest of `\u{…}` after the `u`.
        ///
        /// It is one to eight hex digits naming a Unicode scalar (not a surrogate).
        mutating func unicodeEscape(startingAt escapeColumn: Int) throws -> Unicode.Scalar {
            let malformed = ScenarioParseError(
                message: #"bad \u escape: write one to eight hex digits in braces, as in \u{1F600}"#, column: escapeColumn)
            guard next() == "{" else { throw malformed }
            var digits = ""
            var closed = false
            while let scalar = next() {
                if scalar == "}" {
                    closed = true
                    break
                }
                guard scalar.properties.isASCIIHexDigit, digits.count < 8 else { throw malformed }
                digits.unicodeScalars.append(scalar)
            }
            guard closed, let value = UInt32(digits, radix: 16) else { throw malformed }
            guard let scalar = Unicode.Scalar(value) else {
                throw ScenarioParseError(
                    message: #"bad \u escape: \#(digits) is not a Unicode scalar (above 10FFFF, or a surrogate D800–DFFF)"#,
                    column: escapeColumn)
            }
            return scalar
        }
    }
}
