import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import ProtectedStoreHarness

extension ProtectedStoreCommand {
    /// An interactive prompt over the command language; the same commands from a pipe, without a prompt.
    struct Shell: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Type commands at a prompt that shows the device and the store (or pipe them in).",
            discussion: """
                The state directory keeps the device and the store: quitting and starting again is a reboot. \
                At a terminal, `device unlock` without --passcode asks for it without echoing it. \
                `help` lists the commands; `quit` leaves.
                """)

        @OptionGroup var options: SessionOptions
        @OptionGroup var logging: LoggingOptions

        @MainActor
        func run() async throws {
            logging.bootstrap()
            let directory = options.stateDirectory ?? "protected-store-state"
            let interactive = isatty(STDIN_FILENO) == 1
            let session = try ScenarioSession(stateDirectory: directory, kdf: options.kdf)
            var failedExpectations = 0
            var lineNumber = 0
            if interactive {
                print("protected-store shell — state in \(directory). `help` lists the commands, `quit` leaves.")
            }
            while true {
                if interactive {
                    print("[\(session.promptSummary)] > ", terminator: "")
                    fflush(nil)  // flushes every output stream; `stdout` is a global Swift 6 cannot reference safely
                }
                guard let line = readLine(strippingNewline: true) else { break }
                lineNumber += 1
                let where_ = interactive ? "" : "line \(lineNumber): "
                let trimmed = line.trimmingCharacters(in: .whitespaces)
                if trimmed == "quit" || trimmed == "exit" { break }
                if trimmed == "help" {
                    print(Self.help)
                    continue
                }
                do {
                    guard var command = try ScenarioParser.parse(line, passcodeMayBePrompted: interactive) else { continue }
                    if case .deviceUnlock(nil) = command {
                        command = .deviceUnlock(passcode: Self.readPasscode())
                    } else if case .deviceSetup(nil, let grace, let wipeAfter) = command {
                        command = .deviceSetup(passcode: Self.readPasscode(), grace: grace, wipeAfter: wipeAfter)
                    }
                    if let failure = await session.execute(command) {
                        failedExpectations += 1
                        print("\(where_)FAILED: \(failure)")
                    } else if case .expect = command, interactive {
                        print("ok")
                    }
                } catch let error as ScenarioParseError {
                    print("\(where_)error: \(error.message)")
                }
                // What a command acknowledged reaches a pipe before the next command starts, so a reader
                // (and a crash test that kills this process) never misses an acknowledgement.
                fflush(nil)
            }
            if failedExpectations > 0 { throw ExitCode(1) }
        }

        /// Reads a passcode from the terminal with echo off, so it is never shown.
        static func readPasscode() -> String {
            print("passcode: ", terminator: "")
            fflush(nil)  // flushes every output stream; `stdout` is a global Swift 6 cannot reference safely
            var saved = termios()
            tcgetattr(STDIN_FILENO, &saved)
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
            defer {
                tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved)
                print("")
            }
            return readLine(strippingNewline: true) ?? ""
        }

        static let help = """
            device setup [--passcode P] [--grace 10s] [--wipe-after 10]   (no --passcode: asked for, not echoed)
            device reboot | device lock | device unlock [--passcode P]
            device change-passcode --old P --new Q
            clock advance DURATION                      500ms, 10s, 5m, 1h
            app launch [--background] [--reason user|location|remote-notification|background-fetch]
                       [--protection complete|complete-unless-open|until-first-unlock|none] [--attach-delay DURATION]
            app terminate | app crash
            ui NAME | put KEY VALUE | get KEY | delete KEY
            inbox put KEY VALUE                         a write while locked: sealed now, merged at the next attach
            status
            expect protected-data available|unavailable     expect store launching|waiting|ready|failed
            expect coordinator assigned|nil                 expect interaction enabled|disabled
            expect queued N | expect ran NAME... | expect value KEY VALUE | expect missing KEY
            expect error CODE|none | expect presented-error none|CODE
            expect device unlocked|locked|grace-period|before-first-unlock|wiped | expect inbox N
            expect no-plaintext | expect integrity ok
            """
    }
}
