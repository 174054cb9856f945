import Foundation

/// A scenario script: its commands with their line numbers, parsed completely before anything runs, so a
/// mistake on line 50 never runs lines 1 to 49.
public struct ScenarioScript: Sendable {
    /// The file the script came from, as named in messages.
    public let name: String
    /// The commands and the line each came from.
    public let lines: [(number: Int, command: ScenarioCommand)]

    /// A line that could not be parsed, named by file, line and (when it can be named) column.
    public struct ParseFailure: Error, CustomStringConvertible {
        /// The script's name.
        public let name: String
        /// The line number, from 1.
        public let line: Int
        /// Where on the line, from 1, in Unicode scalars: set for the tokenizer's errors (a quote left open,
        /// an unknown escape, a backslash outside quotes).
        public let column: Int?
        /// What is wrong with the line.
        public let message: String

        init(name: String, line: Int, column: Int? = nil, message: String) {
            self.name = name
            self.line = line
            self.column = column
            self.message = message
        }

        /// `FILE:LINE:COLUMN: message`, or `FILE:LINE: message` when no column is known.
        public var description: String { "\(name):\(line):" + (column.map { "\($0):" } ?? "") + " \(message)" }
    }

    /// Parses a script's text: lines end at a line feed, a carriage return before it is dropped (CRLF), and
    /// a byte order mark at the start is skipped.
    ///
    /// - Throws: ``ParseFailure`` for the first line that cannot be parsed.
    public init(name: String, text: String) throws {
        var lines: [(Int, ScenarioCommand)] = []
        for (index, line) in Self.lines(of: text).enumerated() {
            do {
                if let command = try ScenarioParser.parse(line) { lines.append((index + 1, command)) }
            } catch let error as ScenarioParseError {
                throw ParseFailure(name: name, line: index + 1, column: error.column, message: error.message)
            }
        }
        self.name = name
        self.lines = lines
    }

    /// The lines of `text`, split at line feeds by scalar: `"\r\n"` is one `Character`, so splitting by
    /// characters would leave a CRLF file as one long line. The tokenizer drops the carriage return.
    static func lines(of text: String) -> [String] {
        var scalars = Substring(text).unicodeScalars
        if scalars.first == "\u{FEFF}" { scalars.removeFirst() }
        return scalars.split(separator: "\n", omittingEmptySubsequences: false).map { String(Substring($0)) }
    }

    /// Reads and parses the script at `path`.
    public init(contentsOf path: String) throws {
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw ParseFailure(name: path, line: 0, message: "cannot read the script (missing, unreadable or not UTF-8)")
        }
        try self.init(name: path, text: text)
    }

    /// How many `expect` lines it has.
    public var expectationCount: Int {
        lines.filter { if case .expect = $0.command { true } else { false } }.count
    }

    /// Runs the script in `session`.
    ///
    /// - Returns: `nil` when every expectation held, or the first that did not, as `FILE:LINE: expected …, got …`.
    @MainActor
    public func run(in session: ScenarioSession) async -> String? {
        for (number, command) in lines {
            if let failure = await session.execute(command) {
                return "\(name):\(number): \(failure)"
            }
        }
        return nil
    }
}
