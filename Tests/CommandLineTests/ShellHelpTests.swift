import Foundation
import ProtectedStoreHarness
import TestSupport
import Testing

/// The shell's `help`, written from the parser's table of commands (``ScenarioSyntax``): it lists every command
/// the parser accepts, with its arguments (issue 30, finding 5).
@Suite("the shell's help", .timeLimit(.minutes(3)))
struct ShellHelpTests {
    /// `text` with every run of spaces and line feeds made one space: `help` wraps long lines.
    static func flattened(_ text: String) -> String {
        text.split(whereSeparator: { $0 == " " || $0 == "\n" }).joined(separator: " ")
    }

    @Test("help lists every command of the parser's table with its arguments and what it does")
    func helpListsEveryCommand() throws {
        let directory = TemporaryDirectory()
        let result = try ProtectedStoreBinary.shell(["help"], state: directory.file("state"))
        #expect(result.status == 0, "\(result.error)")
        let help = Self.flattened(result.output)
        for syntax in ScenarioSyntax.allCases {
            #expect(help.contains(Self.flattened(syntax.usage)), "help leaves out \(syntax.usage)")
            #expect(help.contains(Self.flattened(syntax.summary)), "help leaves out what \(syntax.usage) does")
        }
        // What the first help left out (issue 30).
        for usage in [
            "device power-cut", "inbox delete KEY", "inbox quarantine", "inbox retry", "inbox discard ID|all",
            "inbox put [--kind NAME]", "--bytes N", "expect quarantined N", "terminated|not-running",
        ] {
            #expect(help.contains(usage), "help leaves out \(usage)")
        }
    }

    @Test("no line of help is wider than 80 columns")
    func helpFitsEightyColumns() throws {
        let directory = TemporaryDirectory()
        let result = try ProtectedStoreBinary.shell(["help"], state: directory.file("state"))
        for line in result.output.split(separator: "\n") {
            #expect(line.count <= 80, "\(line.count) columns: \(line)")
        }
    }
}
