import FuzzDriver
import Glibc
import ProtectedStoreHarness

// Any bytes as a scenario script. Each line parses to a command or throws a ScenarioParseError naming the
// problem (and, for the tokenizer's errors, a column on that line); a parsed command renders back to one line
// that parses to the same command. The whole input as a script (CRLF, byte order mark and all): when it parses,
// its commands rendered as a script of their own (with CRLF endings) parse back to the same commands.
plantSeeds([
    "device setup --passcode 1234 --grace 10s --wipe-after 10\ndevice unlock --passcode \"a b\"\ndevice change-passcode --old 1 --new 2",
    "app launch --background --reason location --protection complete-unless-open --attach-delay 500ms\nclock advance 1h",
    "put \"a key\" \"quote \\\" and # hash\" # comment\nget k\ndelete k\ninbox put k v\nui refresh\nstatus\napp crash\napp terminate",
    "expect store ready\nexpect value k v\nexpect queued 3\nexpect ran a b\nexpect error wrong-passcode\nexpect no-plaintext\nexpect integrity ok",
    "put \"tab\\there\" \"line\\nbreak \\u{1F600} \\\\ \\\" # kept\\r\\0\" # comment\r\nexpect value \"tab\\there\" \"\"\r\n"
        + "inbox discard \"all\"\r\ninbox discard all\r\nui \"--flag-like\"\r\ninbox put --kind \"  k \" \"--bytes\" 3\r\n",
    "\u{FEFF}put k \"unterminated\nput k a\\b\nput k \"bad \\q\"\nput k \"\\u{D800}\"\nput k \"a\"b\nput k a\"b\"",
].map { Array($0.utf8) })

/// Stops the run with what went wrong; libFuzzer keeps the input that caused it.
func fail(_ message: String) -> Never {
    fatalError(message)
}

exit(runFuzzer { data, count in
    let text = String(decoding: fuzzInput(data, count), as: UTF8.self)
    for line in text.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false).map({ String(Substring($0)) }) {
        let command: ScenarioCommand
        do {
            guard let parsed = try ScenarioParser.parse(line) else { continue }
            command = parsed
        } catch let error as ScenarioParseError {
            if let column = error.column, !(1...line.unicodeScalars.count + 1).contains(column) {
                fail("\(line.debugDescription): error at column \(column), outside the line: \(error)")
            }
            continue
        } catch {
            fail("\(line.debugDescription): ScenarioParser threw \(error), not a ScenarioParseError")
        }
        let rendered = command.scriptLine
        if rendered.unicodeScalars.contains(where: { $0 == "\n" || $0 == "\r" }) {
            fail("\(command) rendered over more than one line: \(rendered.debugDescription)")
        }
        guard let reparsed = try? ScenarioParser.parse(rendered), reparsed == command else {
            fail("\(line.debugDescription) parsed as \(command), rendered as \(rendered.debugDescription), which parses as \(String(describing: try? ScenarioParser.parse(rendered)))")
        }
    }
    do {
        let script = try ScenarioScript(name: "fuzz", text: text)
        let commands = script.lines.map(\.command)
        let rendered = commands.map(\.scriptLine).joined(separator: "\r\n") + "\r\n"
        let reparsed = try? ScenarioScript(name: "rendered", text: rendered).lines.map(\.command)
        if reparsed != commands {
            fail("script \(text.debugDescription) rendered as \(rendered.debugDescription) does not parse back to its \(commands.count) commands")
        }
    } catch let failure as ScenarioScript.ParseFailure {
        if failure.line < 1 { fail("\(text.debugDescription): a parse failure on line \(failure.line)") }
    } catch {
        fail("ScenarioScript threw \(error), not a ParseFailure")
    }
    return 0
})
