import Foundation
import TestSupport
import Testing

/// Issue 26 finding 10, first half: with a device agent, the passcode a client shell reads from a script line
/// should not stay in the shell's memory. Its input buffers are the part checked here: the raw bytes read from
/// standard input (the only copies that hold the line ending) are zeroed as soon as a line is taken from them.
@Suite(
    "A client shell's memory after a passcode went to the agent", .timeLimit(.minutes(3)),
    .enabled(if: geteuid() == 0, "reads another process's memory (/proc/PID/mem), which needs root"))
struct ClientPasscodeMemoryTests {
    @Test("after lock and the grace period, no input buffer of a client shell holds a passcode line it read (the raw bytes, line ending included)")
    func noPasscodeLineInTheInputBuffers() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("s")
        let agent = try LiveProcess.agent(state: state)
        defer { agent.kill() }
        let shell = try LiveProcess.shell(state: state)
        defer { shell.kill() }
        let passcode = "Zq7x-unique-passcode-9183"
        try shell.commands([
            "device setup --passcode \(passcode) --grace 1s", "device lock", "device unlock --passcode \(passcode)",
            "device lock", "clock advance 5s", "expect device locked",
        ])
        // `device unlock --passcode P` ends with P: P and the line feed after it are the raw input, never a string
        // the parser made.
        let found = try Array((passcode + "\n").utf8).withUnsafeBytes {
            try ProcessMemory.occurrences(of: $0, inProcess: shell.processID)
        }
        #expect(found.isEmpty, "\(found.count) raw copies of the passcode line in the client shell's memory")
    }
}
