import FuzzDriver
import Glibc
import ProtectedStoreHarness

// Any bytes as a scenario script: each line parses to a command or throws a ScenarioParser error naming the
// problem; a parsed command renders back to a line that parses to the same command.
exit(runFuzzer { data, count in
    let text = String(decoding: fuzzInput(data, count), as: UTF8.self)
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        guard let command = try? ScenarioParser.parse(String(line)) else { continue }
        let rendered = command.scriptLine
        guard let reparsed = try? ScenarioParser.parse(rendered), reparsed == command else {
            fatalError("'\(line)' parsed, rendered as '\(rendered)', which does not parse back to the same command")
        }
    }
    return 0
})
