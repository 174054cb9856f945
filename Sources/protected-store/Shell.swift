import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ProtectedStoreHarness
import SecureKeys

extension ProtectedStoreCommand {
    /// An interactive prompt over the command language; the same commands from a pipe, without a prompt.
    struct Shell: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Type commands at a prompt that shows the device and the store (or pipe them in).",
            discussion: """
                The state directory keeps the device and the store: quitting and starting again is a reboot. \
                When `protected-store device serve` runs on the same directory, the device commands, the device \
                clock and the store's key go through it; otherwise the shell opens the device itself, and is \
                refused (state-in-use) while another process has it open. \
                At a terminal, `device setup`, `device unlock` and `device change-passcode` without their passcodes \
                ask for them without echoing them (a new passcode twice; Ctrl-D cancels). \
                `help` lists the commands; `quit` leaves. \
                Errors (a line that cannot be parsed, an expect that does not hold) go to standard error. Reading a \
                pipe or a file, the shell stops at the first: exit 2 for a line it cannot parse, 1 for an expect \
                that does not hold — unless --keep-going, which runs every line and exits with the worst status (as an \
                interactive session does when it ends).
                """)

        @OptionGroup var options: SessionOptions
        @OptionGroup var logging: LoggingOptions

        @Flag(
            name: .customLong("keep-going"),
            help: "Reading a pipe or a file, run every line even after an error (the exit status still reports it).")
        var keepGoing = false

        @MainActor
        func run() async throws {
            logging.bootstrap()
            let directory = options.stateDirectory ?? "protected-store-state"
            let input = try StandardInput()
            let interactive = input.isTerminal
            let prompt = PasscodePrompt(input: input)
            let session = try ScenarioSession(stateDirectory: directory, kdf: options.kdf)
            var status = ShellStatus(stopsAtFirstError: !interactive && !keepGoing)
            var lineNumber = 0
            if interactive {
                print("protected-store shell — state in \(directory). `help` lists the commands, `quit` leaves.")
            }
            while true {
                if interactive {
                    print("[\(session.promptSummary)] > ", terminator: "")
                    fflush(nil)  // flushes every output stream; `stdout` is a global Swift 6 cannot reference safely
                }
                // The line, in guarded memory, is zeroed once this turn of the loop ends: it may hold a
                // passcode, which goes from it to the command's own guarded memory (issue 26, finding 10).
                guard let line = try input.readLine() else { break }
                defer { line.wipe() }
                lineNumber += 1
                let where_ = interactive ? "" : "line \(lineNumber): "
                if Self.line(line, is: "quit") || Self.line(line, is: "exit") { break }
                if Self.line(line, is: "help") {
                    print(Self.help)
                    continue
                }
                do {
                    guard let parsed = try ScenarioParser.parse(utf8: line, passcodeMayBePrompted: interactive) else { continue }
                    let command = try Self.askingForPasscodes(parsed, with: prompt)
                    if let failure = await session.execute(command) {
                        try status.record(.failedExpectation, "\(where_)FAILED: \(failure)")
                    } else if case .expect = command, interactive {
                        print("ok")
                    }
                } catch let error as ScenarioParseError {
                    let place = error.column.map { interactive ? "column \($0): " : "line \(lineNumber), column \($0): " } ?? where_
                    try status.record(.unparsableLine, "\(place)error: \(error.message)")
                } catch let refusal as PasscodePrompt.Refusal {
                    StandardError.write(refusal.description)
                }
                // What a command acknowledged reaches a pipe before the next command starts, so a reader
                // (and a crash test that kills this process) never misses an acknowledgement.
                fflush(nil)
            }
            try status.finish()
        }

        /// Whether `line` is `word`, with spaces or tabs around it: compared in place, so that a line holding a
        /// passcode is never made into a string.
        static func line(_ line: SecureBytes, is word: String) -> Bool {
            let blank: Set<UInt8> = [UInt8(ascii: " "), UInt8(ascii: "\t")]
            return (try? line.withUnsafeBytes { bytes in
                guard let first = bytes.firstIndex(where: { !blank.contains($0) }),
                    let last = bytes.lastIndex(where: { !blank.contains($0) })
                else { return false }
                return bytes[first...last].elementsEqual(word.utf8)
            }) ?? false
        }

        /// The command with every passcode left out of the line asked for at the terminal.
        @MainActor
        static func askingForPasscodes(_ command: ScenarioCommand, with prompt: PasscodePrompt) throws(PasscodePrompt.Refusal)
            -> ScenarioCommand
        {
            switch command {
            case .deviceUnlock(nil):
                return .deviceUnlock(passcode: try prompt.existing("passcode", for: "device unlock"))
            case .deviceSetup(nil, let grace, let wipeAfter, let allowEmpty):
                let passcode = try prompt.new(for: "device setup", allowEmpty: allowEmpty)
                return .deviceSetup(passcode: passcode, grace: grace, wipeAfter: wipeAfter, allowEmptyPasscode: allowEmpty)
            case .deviceChangePasscode(let old, let new, let allowEmpty) where old == nil || new == nil:
                var current = old
                if current == nil { current = try prompt.existing("current passcode", for: "device change-passcode") }
                var next = new
                if next == nil { next = try prompt.new(for: "device change-passcode", allowEmpty: allowEmpty) }
                return .deviceChangePasscode(old: current, new: next, allowEmptyPasscode: allowEmpty)
            default:
                return command
            }
        }

        static let help = """
            device setup [--passcode P] [--grace 10s] [--wipe-after 10] [--allow-empty-passcode]
                                                        (no --passcode: asked for twice, not echoed)
            device reboot | device lock | device unlock [--passcode P]
            device change-passcode [--old P] [--new Q] [--allow-empty-passcode]   (left out: asked for)
            clock advance DURATION                      500ms, 10s, 5m, 1h
            app launch [--background] [--reason user|location|remote-notification|background-fetch]
                       [--protection complete|complete-unless-open|until-first-unlock|none] [--attach-delay DURATION]
            app terminate | app crash
            ui NAME | put KEY VALUE | get KEY | delete KEY
            inbox put KEY VALUE                         a write while locked: sealed now, merged at the next attach
            damage inbox|store-key|inbox-key|keybag|device-state
                   truncate-tail N | byte OFFSET set VALUE | byte OFFSET flip | length OFFSET VALUE | restore
                                                        damage a file in place (bit rot, a cut-short append);
                                                        restore puts back what its last damage replaced
            status
            fault next-io ENOSPC|EIO|short-write|power-cut [--after N] [--persistent] [--mode M] [--seed S]
                                                        the next command's call N+1 fails (a full or failing disk, a cut)
            expect protected-data available|unavailable     expect store launching|waiting|ready|failed
            expect coordinator assigned|nil                 expect interaction enabled|disabled
            expect queued N | expect ran NAME... | expect value KEY VALUE | expect missing KEY
            expect error CODE|none | expect presented-error none|CODE
            expect device unlocked|locked|grace-period|before-first-unlock|wiped | expect inbox N
            expect no-plaintext | expect integrity ok | expect inbox-damaged BYTES   (moved aside, not merged)
            "a value"  quoted: keeps spaces and #; escapes \\n \\t \\r \\0 \\\\ \\" \\u{1F600}; # outside quotes: a comment
            """
    }
}
