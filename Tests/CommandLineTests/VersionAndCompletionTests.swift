import Foundation
import TestSupport
import Testing

/// `--version`, the passcode-delay message, and the shell completion scripts the README mentions.
@Suite("version, completion and messages", .timeLimit(.minutes(3)))
struct VersionAndCompletionTests {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("--version prints the version that CHANGELOG.md's first release heading names")
    func versionMatchesChangelog() throws {
        let result = try ProtectedStoreBinary.run(["--version"])
        #expect(result.status == 0, "\(result.error)")
        let version = result.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version.split(separator: ".").count == 3 && version.allSatisfy { $0.isNumber || $0 == "." }, "\(version)")
        let changelog = try String(contentsOf: Self.repository.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        // The first release heading: an `## Unreleased` section above it (Keep a Changelog) names no version.
        let heading = changelog.split(separator: "\n").first { $0.hasPrefix("## ") && !$0.hasPrefix("## Unreleased") }
        #expect(heading?.hasPrefix("## \(version) ") == true, "first heading: \(heading ?? "none"), version \(version)")
    }

    @Test("--generate-completion-script produces a completion script for bash, zsh and fish", arguments: ["bash", "zsh", "fish"])
    func completionScript(shell: String) throws {
        let result = try ProtectedStoreBinary.run(["--generate-completion-script", shell])
        #expect(result.status == 0, "\(result.error)")
        let marker = ["bash": "complete -o", "zsh": "#compdef protected-store", "fish": "complete -c 'protected-store'"][shell]!
        #expect(result.output.contains(marker), "\(result.output.prefix(400))")
        for word in ["simulate", "shell", "keep-going", "no-progress"] {
            #expect(result.output.contains(word), "\(shell) script lacks \(word)")
        }
        let readme = try String(contentsOf: Self.repository.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(readme.contains("protected-store --generate-completion-script bash|zsh|fish"))
    }

    @Test("the passcode-delay error says the wait is on the device clock and which command ends it")
    func passcodeDelaySaysTheClock() throws {
        let lines =
            ["device setup --passcode 1", "device lock", "clock advance 1m"] + Array(repeating: "device unlock --passcode 0", count: 5)
            + ["device unlock --passcode 1", "clock advance 59500ms", "device unlock --passcode 1", "clock advance 500ms",
               "device unlock --passcode 1", "expect device unlocked"]
        let directory = TemporaryDirectory()
        let result = try ProtectedStoreBinary.shell(lines, state: directory.path + "/state")
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains(
            "error: wrong-passcode: wrong passcode (5 failed attempts); wait 1m on the device clock before the next attempt (`clock advance 1m`)\n"),
            "\(result.output)")
        #expect(result.output.contains(
            "error: passcode-delay: too many wrong passcodes (5); wait 1m on the device clock before the next attempt (`clock advance 1m`)\n"))
        #expect(result.output.contains(
            "error: passcode-delay: too many wrong passcodes (5); wait 500ms on the device clock before the next attempt (`clock advance 500ms`)\n"))
    }
}
