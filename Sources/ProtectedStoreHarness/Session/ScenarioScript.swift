import DiskModel
import Foundation
import Glibc
public import SecureKeys
import SystemPackage

/// A scenario script, its commands with their line numbers.
///
/// It is parsed completely before anything runs, so a mistake on line 50 never runs lines 1 to 49.
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
        /// Where on the line, from 1, in Unicode scalars.
        ///
        /// It is set for the tokenizer's errors (a quote left open, an unknown escape, a backslash outside quotes).
        public let column: Int?
        /// What is wrong with the line.
        public let message: String

        package init(name: String, line: Int, column: Int? = nil, message: String) {
            self.name = name
            self.line = line
            self.column = column
            self.message = message
        }

        /// `FILE:LINE:COLUMN: message`, or `FILE:LINE: message` when no column is known.
        public var description: String { "\(name):\(line):" + (column.map { "\($0):" } ?? "") + " \(message)" }
    }

    /// Parses a script's text.
    ///
    /// Lines end at a line feed, a carriage return before it is dropped (CRLF), and a byte order mark at the start is
    /// skipped.
    ///
    /// - Throws: ``ParseFailure`` for the first line that cannot be parsed.
    public init(name: String, text: String) throws {
        var text = text
        let lines = try text.withUTF8 { try Self.parse(UnsafeRawBufferPointer($0), name: name) }
        self.name = name
        self.lines = lines
    }

    /// Parses a script whose UTF-8 text is in guarded memory.
    ///
    /// This is how `protected-store run` reads a file or standard input. Its lines are read where they are, and its
    /// passcodes go from there to guarded memory of their own, never through a `String`. Lines end as in
    /// ``init(name:text:)``. The caller wipes `utf8`.
    ///
    /// A byte that is not UTF-8 reads as U+FFFD, as `String(decoding:as:)` repairs it.
    ///
    /// - Throws: ``ParseFailure`` for the first line that cannot be parsed.
    public init(name: String, utf8: SecureBytes) throws {
        let lines = try utf8.withUnsafeBytes { try Self.parse($0, name: name) }
        self.name = name
        self.lines = lines
    }

    /// The commands of a script's UTF-8 text, each with its line number.
    private static func parse(_ text: UnsafeRawBufferPointer, name: String) throws -> [(number: Int, command: ScenarioCommand)] {
        var lines: [(Int, ScenarioCommand)] = []
        let ranges = Self.lines(of: text)
        // One arena for the words of every line (a guarded allocation per line made a long script's parse
        // eight times slower), zeroed after each line.
        let arena = try SecureBytes(count: ScenarioTokenizer.arenaCount(forLineOf: ranges.map(\.count).max() ?? 0))
        for (index, line) in ranges.enumerated() {
            defer {
                let used = ScenarioTokenizer.arenaCount(forLineOf: line.count)
                try? arena.withUnsafeMutableBytes { secureZero(UnsafeMutableRawBufferPointer(start: $0.baseAddress, count: used)) }
            }
            do {
                if let command = try ScenarioParser.parse(utf8Bytes: UnsafeRawBufferPointer(rebasing: text[line]), arena: arena) {
                    lines.append((index + 1, command))
                }
            } catch let error as ScenarioParseError {
                throw ParseFailure(name: name, line: index + 1, column: error.column, message: error.message)
            }
        }
        return lines
    }

    /// Where the lines of `text` are.
    ///
    /// They are split at line feeds (a byte that is one in UTF-8 and nothing else), after a byte order mark at the
    /// start. The tokenizer drops a carriage return ending a line.
    static func lines(of text: UnsafeRawBufferPointer) -> [Range<Int>] {
        var start = text.count >= 3 && text[0] == 0xEF && text[1] == 0xBB && text[2] == 0xBF ? 3 : 0
        var lines: [Range<Int>] = []
        guard let base = text.baseAddress else { return [0..<0] }
        while start < text.count, let found = memchr(base + start, Int32(UInt8(ascii: "\n")), text.count - start) {
            let newline = base.distance(to: UnsafeRawPointer(found))
            lines.append(start..<newline)
            start = newline + 1
        }
        lines.append(start..<text.count)
        return lines
    }

    /// Where the first byte that is not UTF-8 is, checked in place.
    ///
    /// It gives its line and column (from 1, the column in bytes) and its offset, or `nil` when every byte is UTF-8.
    static func firstInvalidUTF8(_ bytes: UnsafeRawBufferPointer) -> (line: Int, column: Int, offset: Int)? {
        var iterator = bytes.makeIterator()
        var parser = Unicode.UTF8.ForwardParser()
        var offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let scalar): offset += scalar.count
            case .error:
                let before = UnsafeRawBufferPointer(rebasing: bytes[..<offset])
                let line = before.count(where: { $0 == UInt8(ascii: "\n") }) + 1
                let lineStart = (before.lastIndex(of: UInt8(ascii: "\n")) ?? -1) + 1
                return (line, offset - lineStart + 1, offset)
            case .emptyInput: return nil
            }
        }
    }

    /// Reads and parses the script at `path`, read into guarded memory (see ``init(name:utf8:)``).
    ///
    /// A pipe is read to its end (`run <(generate-script)`).
    ///
    /// - Throws: ``ParseFailure`` at line 0 saying which of these it is: no file at `path`, a file this user
    ///   may not read, a directory, a read that failed, or a byte that is not UTF-8 (named by line and column);
    ///   ``ParseFailure`` for the first line that cannot be parsed.
    public init(contentsOf path: String) throws {
        let descriptor: FileDescriptor
        do throws(Errno) { descriptor = try systemCall { try FileDescriptor.open(FilePath(path), .readOnly, options: .closeOnExec) } } catch {
            let why = switch error {
            case .noSuchFileOrDirectory: "there is no such file"
            case .permissionDenied: "permission denied (you may not read it)"
            case .notDirectory: "a folder on its path is not a folder"
            default: error.description
            }
            throw ParseFailure(name: path, line: 0, message: "cannot read the script: \(why)")
        }
        defer { try? descriptor.close() }
        if (try? descriptor.stat())?.type == .directory {
            throw ParseFailure(name: path, line: 0, message: "cannot read the script: it is a directory, not a script file")
        }
        guard let text = try Self.readToEnd(descriptor.rawValue) else {
            throw ParseFailure(
                name: path, line: 0, message: "cannot read the script: \(Errno(rawValue: errno).description)")
        }
        defer { text.wipe() }
        if let invalid = try? text.withUnsafeBytes(Self.firstInvalidUTF8) {
            throw ParseFailure(
                name: path, line: 0,
                message: "cannot read the script: it is not UTF-8 text (line \(invalid.line), column \(invalid.column), "
                    + "byte \(invalid.offset) of the file); save it as UTF-8")
        }
        try self.init(name: path, utf8: text)
    }

    /// Everything `descriptor` reads until its end, in guarded memory.
    ///
    /// Storage outgrown is zeroed as it is released. Returns `nil` when reading fails.
    ///
    /// - Throws: `SecureKeysError` with `out-of-memory` when the guarded memory cannot be allocated.
    package static func readToEnd(_ descriptor: Int32) throws -> SecureBytes? {
        var storage = try SecureBytes(count: 64 * 1024)
        var filled = 0
        while true {
            if filled == storage.count {
                let larger = try SecureBytes(count: storage.count * 2)
                let count = filled
                try? storage.withUnsafeBytes { old in
                    try larger.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: old.baseAddress!, byteCount: count) }
                }
                storage.wipe()
                storage = larger
            }
            let start = filled
            // swift-system's read goes round again on EINTR.
            guard let count = try? storage.withUnsafeMutableBytes({
                try FileDescriptor(rawValue: descriptor).read(into: UnsafeMutableRawBufferPointer(rebasing: $0[start...]))
            }) else { return nil }
            if count == 0 { break }
            filled += count
        }
        defer { storage.wipe() }
        let count = filled
        return try storage.withUnsafeBytes { try SecureBytes(copying: UnsafeRawBufferPointer(rebasing: $0[..<count])) }
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
