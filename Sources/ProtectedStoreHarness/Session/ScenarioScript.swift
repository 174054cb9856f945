import Foundation

/// A scenario script: its commands with their line numbers, parsed completely before anything runs, so a
/// mistake on line 50 never runs lines 1 to 49.
public struct ScenarioScript: Sendable {
    /// The file the script came from, as named in messages.
    public let name: String
    /// The commands and the line each came from.
    public let lines: [(number: Int, command: ScenarioCommand)]

    /// A line that could not be parsed, named by file and line.
    public struct ParseFailure: Error, CustomStringConvertible {
        /// The script's name.
        public let name: String
        /// The line number, from 1.
        public let line: Int
        /// What is wrong with the line.
        public let message: String
        /// `FILE:LINE: message`.
        public var description: String { "\(name):\(line): \(message)" }
    }

    /// Parses a script's text.
    ///
    /// - Throws: ``ParseFailure`` for the first line that cannot be parsed.
    public init(name: String, text: String) throws {
        var lines: [(Int, ScenarioCommand)] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            do {
                if let command = try ScenarioParser.parse(String(line)) { lines.append((index + 1, command)) }
            } catch let error as ScenarioParseError {
                throw ParseFailure(name: name, line: index + 1, message: error.message)
            }
        }
        self.name = name
        self.lines = lines
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
