import Foundation
import TestSupport
import Testing

/// Issue 26 finding 10, first half: with a device agent, the passcode a client shell reads from a script line
/// must not stay in the shell's memory once the device is locked and the grace period is over — not in its
/// input buffers, not in the line it parsed, not in the command it sent, not in the frame that carried it — nor
/// in the agent's.
@Suite(
    "A client shell's memory after a passcode went to the agent", .timeLimit(.minutes(3)),
    .enabled(if: geteuid() == 0, "reads another process's memory (/proc/PID/mem), which needs root"))
struct ClientPasscodeMemoryTests {
    @Test("after lock and the grace period, no copy of a passcode the shell read (typed bare, or quoted with escapes) is left in the client shell's memory, nor in the agent's")
    func noPasscodeInTheShellOrTheAgent() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("s")
        let agent = try LiveProcess.agent(state: state)
        defer { agent.kill() }
        let shell = try LiveProcess.shell(state: state)
        defer { shell.kill() }
        // Longer than a small string (15 bytes), so that any String copy is on the heap; and a second passcode
        // written quoted with an escape, so that the tokenizer's unescaped copy is looked for too.
        let passcode = "Zq7x-unique-passcode-9183"
        let changed = "Wm4k unique passcode\t6072"
        let (_, errors) = try shell.commands([
            "device setup --passcode \(passcode) --grace 1s", "device lock", "device unlock --passcode \(passcode)",
            #"device change-passcode --old \#(passcode) --new "Wm4k unique passcode\t6072""#,
            "device lock", #"device unlock --passcode "Wm4k unique passcode\t6072""#, "expect device unlocked",
            "device lock", "clock advance 5s", "expect device locked",
        ])
        #expect(errors.isEmpty, "\(errors)")
        for (secret, what) in [(passcode, "first"), (changed, "second")] {
            let inShell = try Array(secret.utf8).withUnsafeBytes { try ProcessMemory.occurrences(of: $0, inProcess: shell.processID) }
            #expect(inShell.isEmpty, "\(inShell.count) copies of the \(what) passcode in the client shell's memory")
            let inAgent = try Array(secret.utf8).withUnsafeBytes { try ProcessMemory.occurrences(of: $0, inProcess: agent.processID) }
            #expect(inAgent.isEmpty, "\(inAgent.count) copies of the \(what) passcode in the agent's memory")
        }
    }

    @Test("after lock and the grace period, no copy of a passcode typed at the prompt (echo off) is left in the client shell's memory, nor in the agent's")
    func noTypedPasscodeInTheShellOrTheAgent() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("s")
        let agent = try LiveProcess.agent(state: state)
        defer { agent.kill() }
        let terminal = try TerminalSession(["shell", "--fast-kdf", "--state-dir", state])
        let prompt = "] > "
        try terminal.waitFor(prompt)
        let passcode = "Hv3p-typed-passcode-5521"
        try terminal.converse([
            .type("device setup --grace 1s", until: "new passcode: "), .type(passcode, until: "new passcode again: "),
            .type(passcode, until: prompt), .type("device lock", until: prompt),
            .type("device unlock", until: "passcode: "), .type(passcode, until: prompt),
            .type("expect device unlocked", until: "ok", prompt), .type("device lock", until: prompt),
            .type("clock advance 5s", until: prompt), .type("expect device locked", until: "ok", prompt),
        ])
        let inShell = try Array(passcode.utf8).withUnsafeBytes {
            try ProcessMemory.occurrences(of: $0, inProcess: terminal.process.processIdentifier)
        }
        #expect(inShell.isEmpty, "\(inShell.count) copies of the typed passcode in the client shell's memory")
        let inAgent = try Array(passcode.utf8).withUnsafeBytes { try ProcessMemory.occurrences(of: $0, inProcess: agent.processID) }
        #expect(inAgent.isEmpty, "\(inAgent.count) copies of the typed passcode in the agent's memory")
        terminal.send("quit")
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
    }

    @Test("after lock and the grace period, no copy of a passcode typed on the command line at a terminal (read by libedit) is left in the shell's memory, in UTF-8 nor in libedit's wide characters")
    func noCommandLinePasscodeLeftByTheLineEditor() throws {
        let directory = TemporaryDirectory()
        let terminal = try TerminalSession(
            ["shell", "--fast-kdf", "--state-dir", directory.file("s")], environment: ["TERM": "xterm", "EDITRC": "/dev/null"])
        let prompt = "] > "
        try terminal.waitFor(prompt)
        let passcode = "Qx9-cmdline-passcode-7731"
        try terminal.converse([
            .type("device setup --passcode \(passcode) --grace 1s", until: prompt), .type("device lock", until: prompt),
            .type("device unlock --passcode \(passcode)", until: prompt), .type("expect device unlocked", until: "ok", prompt),
            .type("device lock", until: prompt), .type("clock advance 5s", until: prompt),
            .type("expect device locked", until: "ok", prompt),
        ])
        // libedit keeps a line in wide characters (UTF-32 on Linux) as well as in the UTF-8 it returns.
        let wide = passcode.unicodeScalars.flatMap { scalar in withUnsafeBytes(of: scalar.value.littleEndian) { Array($0) } }
        for (form, bytes) in [("UTF-8", Array(passcode.utf8)), ("UTF-32", wide)] {
            let copies = try bytes.withUnsafeBytes { try ProcessMemory.occurrences(of: $0, inProcess: terminal.process.processIdentifier) }
            #expect(copies.isEmpty, "\(copies.count) copies of the passcode in \(form) in the shell's memory")
        }
        terminal.send("quit")
        #expect(try terminal.finish() == 0, "\(terminal.transcript)")
    }

    @Test("a passcode in a line the shell rejects (device unlock --passcode=P, the passcode alone at the prompt) is not repeated in the error, and after lock and the grace period no copy of it is left in the shell's memory")
    func noRejectedPasscodeLeftInMemory() throws {
        let directory = TemporaryDirectory()
        let terminal = try TerminalSession(
            ["shell", "--fast-kdf", "--state-dir", directory.file("s")], environment: ["TERM": "xterm", "EDITRC": "/dev/null"])
        let prompt = "] > "
        try terminal.waitFor(prompt)
        let passcode = "Tn6-rejected-passcode-2047"
        try terminal.converse([
            .type("device setup --passcode \(passcode) --grace 1s", until: prompt), .type("device lock", until: prompt),
            .type("clock advance 5s", until: prompt),
            // Rejected forms: glued to its option with `=`, typed alone as if at a passcode prompt, and as an action.
            .type("device unlock --passcode=\(passcode)", until: "error: device unlock: unknown option", prompt),
            .type(passcode, until: "error: unknown command", prompt),
            .type("device \(passcode)", until: "error: unknown device action", prompt),
            .type("expect device locked", until: "ok", prompt),
            .type("device unlock --passcode \(passcode)", until: prompt), .type("expect device unlocked", until: "ok", prompt),
            .type("device lock", until: prompt), .type("clock advance 5s", until: prompt),
            .type("expect device locked", until: "ok", prompt),
        ])
        // The terminal echoes what is typed; the shell's own lines (its errors) never repeat the passcode.
        let errorLines = terminal.transcript.components(separatedBy: "\r\n").filter { $0.contains("error:") }
        #expect(errorLines.count == 3, "\(terminal.transcript)")
        for line in errorLines {
            #expect(!line.contains(passcode) && !line.contains("2047"), "an error repeats the passcode: \(line)")
        }
        let wide = passcode.unicodeScalars.flatMap { scalar in withUnsafeBytes(of: scalar.value.littleEndian) { Array($0) } }
        for (form, bytes) in [("UTF-8", Array(passcode.utf8)), ("UTF-32", wide)] {
            let copies = try bytes.withUnsafeBytes { try ProcessMemory.occurrences(of: $0, inProcess: terminal.process.processIdentifier) }
            #expect(copies.isEmpty, "\(copies.count) copies of the passcode in \(form) in the shell's memory")
        }
        terminal.send("quit")
        // The worst error of the session was a line that could not be parsed: exit 2.
        #expect(try terminal.finish() == 2, "\(terminal.transcript)")
    }
}
