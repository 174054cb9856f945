import ArgumentParser
import Foundation
import Glibc
import ProtectedStoreHarness
import SecureKeys

extension ProtectedStoreCommand {
    /// An interactive prompt over the command language.
    ///
    /// From a pipe it reads the same commands, without a prompt.
    struct Shell: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Type commands at a prompt that shows the device and the store (or pipe them in).",
            discussion: """
                The state directory keeps the device and the store: quitting and starting again is a reboot. \
                When `protected-store device serve` runs on the same directory, the device commands, the device \
                clock and the store's key go through it; otherwise the shell opens the device itself, and is \
                refused (state-in-use) while another process has it open. \
                At a terminal, `device setup`, `device unlock` and `device change-passcode` without their passcodes \
                ask for them without echoing them (a new passcode twice; Ctrl-D cancels; with no device, unlock and \
                change-passcode say no-device before asking). \
                At a terminal, lines are edited as in other shells (libedit: arrows, Ctrl-A, Ctrl-E, ~/.editrc), \
                the up and down arrows recall earlier lines, kept in the state directory's `shell-history` (mode \
                0600; never a line of device setup, unlock or change-passcode, nor of put, inbox put or expect value, which \
                hold a value, nor one that names no command), \
                Ctrl-C clears the line (during a command it still ends the shell) and Ctrl-D on an empty line \
                leaves. `help` lists the commands; `quit` leaves. \
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
            // What the commands print may repeat what was typed (a key, an operation's name): shown with its
            // control characters escaped, so that an escape sequence in it cannot move the cursor.
            let session = try ScenarioSession(
                stateDirectory: directory, kdf: options.kdf, keyStore: options.keyStore.store(for: directory)
            ) { line in
                print(ScenarioQuoting.escapingControlCharacters(line))
            }
            // At a terminal, libedit reads the lines (editing, history, Ctrl-C clearing the line); from a pipe or
            // a file, the plain reader, which keeps every byte of a line in guarded memory.
            let editor = interactive && isatty(STDOUT_FILENO) == 1 ? LineEditor(historyFile: directory + "/" + ScenarioSession.shellHistoryFileName) : nil
            if interactive {
                print("protected-store shell — state in \(directory). `help` lists the commands, `quit` leaves.")
            }
            // However the lines end — input's end, `quit`, a failure that stops the shell — the app ends as a
            // process that exits cleanly does, before the process exits.
            do {
                try await readLines(into: session, from: input, editor: editor, prompt: prompt)
            } catch {
                await session.end()
                throw error
            }
            await session.end()
        }

        /// Reads and runs lines until the input ends or `quit`.
        ///
        /// What failed is recorded in a ``ShellStatus``.
        ///
        /// - Throws: `ExitCode` with the status of the first failure, when a pipe's session stops there, or of the
        ///   worst one at the end.
        @MainActor
        private func readLines(
            into session: ScenarioSession, from input: StandardInput, editor: LineEditor?, prompt: PasscodePrompt
        ) async throws {
            let interactive = input.isTerminal
            var status = ShellStatus(stopsAtFirstError: !interactive && !keepGoing)
            var lineNumber = 0
            reading: while true {
                // The line, in guarded memory, is zeroed once this turn of the loop ends: it may hold a
                // passcode, which goes from it to the command's own guarded memory.
                let line: SecureBytes
                if let editor {
                    switch try editor.readLine(prompt: "[\(session.promptSummary)] > ") {
                    case .line(let read):
                        line = read
                    case .interrupted:
                        // Ctrl-C at the prompt drops what was typed and asks again, as a shell does.
                        print("^C")
                        continue reading
                    case .end:
                        print("")  // Ctrl-D: what comes next starts on a line of its own, not after the prompt
                        break reading
                    }
                } else {
                    if interactive {
                        print("[\(session.promptSummary)] > ", terminator: "")
                        fflush(nil)  // flushes every output stream; `stdout` is a global Swift 6 cannot reference safely
                    }
                    guard let read = try input.readLine() else {
                        if interactive { print("") }
                        break reading
                    }
                    line = read
                }
                defer { line.wipe() }
                lineNumber += 1
                let where_ = interactive ? "" : "line \(lineNumber): "
                if Self.line(line, is: "quit") || Self.line(line, is: "exit") { break }
                if let editor, Self.mayBeKept(line) { editor.remember(line) }
                if Self.line(line, is: "help") {
                    print(Self.help)
                    continue
                }
                do {
                    guard let parsed = try ScenarioParser.parse(utf8: line, passcodeMayBePrompted: interactive) else { continue }
                    if Self.asksForPasscodes(parsed), await session.refuseWithoutDevice() { continue }
                    let command = try Self.askingForPasscodes(parsed, with: prompt)
                    if let failure = await session.execute(command) {
                        try status.record(.failedExpectation, ScenarioQuoting.escapingControlCharacters("\(where_)FAILED: \(failure)"))
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

        /// Whether the history may keep `line`.
        ///
        /// It may keep `help`, or a line that names a command of the language that holds neither a passcode nor a
        /// value the app stores (`put`, `inbox put`, `expect value`). A line that names no command is not kept
        /// either: it may be a passcode typed at the wrong prompt.
        static func mayBeKept(_ line: SecureBytes) -> Bool {
            if Self.line(line, is: "help") { return true }
            guard let syntax = ScenarioParser.syntax(utf8: line) else { return false }
            return !syntax.holdsPasscode && !syntax.holdsValue
        }

        /// Whether `command` is to ask for passcodes that only a device can check.
        ///
        /// Those commands are `device unlock` and `device change-passcode`. Without a device such a command is
        /// refused before anything is asked.
        static func asksForPasscodes(_ command: ScenarioCommand) -> Bool {
            switch command {
            case .deviceUnlock(nil): true
            case .deviceChangePasscode(let old, let new, _): old == nil || new == nil
            default: false
            }
        }

        /// Whether `line` is `word`, with spaces or tabs around it.
        ///
        /// It is compared in place, so that a line holding a passcode is never made into a string.
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

        /// The language, from its table of commands, then the shell's own words.
        static let help = ScenarioSyntax.help() + """


            help
                Lists the commands.
            quit | exit
                Leaves the shell (so does Ctrl-D at the prompt).
            """
    }
}
