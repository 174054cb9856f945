import FuzzDriver
import Glibc
import ProtectedStoreHarness

// Any bytes as a scenario script: each line parses to a command or throws a ScenarioParser error naming the
// problem; a parsed command renders back to a line that parses to the same command.
plantSeeds([
    "device setup --passcode 1234 --grace 10s --wipe-after 10\ndevice unlock --passcode \"a b\"\ndevice change-passcode --old 1 --new 2",
    "app launch --background --reason location --protection complete-unless-open --attach-delay 500ms\nclock advance 1h",
    "put \"a key\" \"quote \\\" and # hash\" # comment\nget k\ndelete k\ninbox put k v\nui refresh\nstatus\napp crash\napp terminate",
    "expect store ready\nexpect value k v\nexpect queued 3\nexpect ran a b\nexpect error wrong-passcode\nexpect no-plaintext\nexpect integrity ok",
].map { Array($0.utf8) })

exit(runFuzzer { data, count in
    let text = String(decoding: fuzzInput(data, count), as: UTF8.self)
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        guard let command = try? ScenarioParser.parse(String(line)) else { continue }
        let rendered = command.scriptLine
        guard let reparsed = try? ScenarioParser.parse(rendered), reparsed == command else {
            fatalError("\(String(line).debugDescription) parsed as \(command), rendered as \(rendered.debugDescription), which parses as \(String(describing: try? ScenarioParser.parse(rendered)))")
        }
    }
    return 0
})
