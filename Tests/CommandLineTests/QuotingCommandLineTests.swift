import Foundation
import TestSupport
import Testing

@Suite("the command language through the binary: quotes, escapes, CRLF", .timeLimit(.minutes(3)))
struct QuotingCommandLineTests {
    @Test("run reads a CRLF script with quoted values and escapes, and prints values as a script writes them")
    func runReadsQuotedValues() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("crlf.scenario")
        let script = [
            "device setup --passcode \"a b\"", "app launch", #"put "two words" "tab\there # not a comment""#,
            #"put nl "x\ny""#, "put plain Lyon", #"get "two words""#, "get nl", "get plain",
            #"expect value "two words" "tab\u{9}here # not a comment""#, "expect value nl \"x\\ny\"  # a comment",
        ].joined(separator: "\r\n") + "\r\n"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        let result = try ProtectedStoreBinary.run(["run", "--fast-kdf", path])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains(#"  "two words" = "tab\there # not a comment""#), "\(result.output)")
        #expect(result.output.contains(#"  nl = "x\ny""#), "\(result.output)")
        #expect(result.output.contains("  plain = Lyon\n"), "\(result.output)")
        #expect(result.output.contains("10 commands, 2 expectations held"), "\(result.output)")
    }

    @Test("a failed expect shows both values quoted, so white space differences can be seen")
    func failedExpectationQuotesValues() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("spaces.scenario")
        try "device setup --passcode 1\napp launch\nput k \"v \"\nexpect value k v\n".write(toFile: path, atomically: true, encoding: .utf8)
        let result = try ProtectedStoreBinary.run(["run", "--fast-kdf", path])
        #expect(result.status == 1)
        #expect(result.error == "\(path):4: expected value k = v, got value k = \"v \"\n", "\(result.error)")
    }

    @Test("the shell names the line and the column of a quote left open, and never echoes the line")
    func shellNamesTheColumn() throws {
        let directory = TemporaryDirectory()
        let result = try ProtectedStoreBinary.run(
            ["shell", "--fast-kdf", "--state-dir", directory.file("state")],
            input: "device setup --passcode 1\ndevice unlock --passcode \"s3cret\n")
        let said = result.output + result.error
        #expect(said.contains("line 2, column 26: error: unterminated quote"), "\(said)")
        #expect(!said.contains("s3cret"))
    }
}
