import DiskModel
import ArgumentParser
import Foundation
import ProtectedStoreHarness
import ProtectedStore
import SecureKeys

extension ProtectedStoreCommand {
    /// Runs scenario scripts.
    ///
    /// It exits 0 when every `expect` holds, 1 at the first that does not, and 2 for a line that cannot be parsed.
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run scenario scripts, each on a fresh temporary state directory with the clock at 0.",
            discussion: """
                Exit status: 0 when every expect holds; 1 at the first that does not (FILE:LINE: expected …, got …); \
                2 for a line that cannot be parsed (FILE:LINE: what is wrong). Every script is parsed before any runs. \
                `-` reads a script from standard input (named <stdin> in messages).
                """)

        @Argument(help: "Scenario scripts to run, in order; `-` reads one from standard input.")
        var scripts: [String]

        @OptionGroup var options: SessionOptions
        @OptionGroup var logging: LoggingOptions

        func validate() throws {
            if scripts.isEmpty { throw ValidationError("name at least one scenario script (or `-` for standard input)") }
            if scripts.filter({ $0 == "-" }).count > 1 {
                throw ValidationError("`-` (standard input) can be named only once: it is read to its end")
            }
        }

        @MainActor
        func run() async throws {
            logging.bootstrap()
            try await SignalCleanup.run { try await work() }
        }

        /// The command itself, inside the signal clean-up's watch.
        @MainActor
        private func work() async throws {
            var parsed: [ScenarioScript] = []
            for path in scripts {
                do {
                    if path == "-" {
                        // Into guarded memory, as a file is: a script's passcodes never go through a String.
                        guard let text = try ScenarioScript.readToEnd(STDIN_FILENO) else {
                            throw ScenarioScript.ParseFailure(name: "<stdin>", line: 0, message: "cannot read standard input")
                        }
                        defer { text.wipe() }
                        parsed.append(try ScenarioScript(name: "<stdin>", utf8: text))
                    } else {
                        parsed.append(try ScenarioScript(contentsOf: path))
                    }
                } catch let failure as ScenarioScript.ParseFailure {
                    StandardError.write("\(failure)")
                    throw ExitCode(2)
                }
            }
            // What the sessions print, wrapped to the terminal (or COLUMNS): a quarantined record's line is 200
            // characters. Whole lines into a pipe or a file.
            let width = OutputWidth.current()
            for script in parsed {
                let directory = try options.stateDirectory ?? TemporaryStateDirectories.make(prefix: "protected-store")
                defer { if options.stateDirectory == nil { TemporaryStateDirectories.remove(directory) } }
                let session = try ScenarioSession(
                    stateDirectory: directory, kdf: options.kdf, keyStore: options.keyStore.store(for: directory)
                ) { OutputWidth.print("  " + $0, width: width) }
                session.plantedFault = options.plant
                let failure = await script.run(in: session)
                // The app ends before the next script or the exit (`ScenarioSession.end()`).
                await session.end()
                if let failure {
                    StandardError.write("\(failure)")
                    throw ExitCode(1)
                }
                OutputWidth.print(
                    "\(script.name): \(counted(script.lines.count, "command")), \(counted(script.expectationCount, "expectation")) held",
                    width: width)
            }
        }
    }
}

/// A count and its noun, in the plural unless the count is 1.
///
/// For example `1 command`, `2 commands`.
func counted(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }

/// Options every session-running command shares.
struct SessionOptions: ParsableArguments {
    @Option(name: .customLong("state-dir"), help: "Keep the device and the store in this directory.")
    var stateDirectory: String?

    @Flag(name: .customLong("fast-kdf"), help: "Argon2id at its minimal cost, for tests: passcodes become guessable.")
    var fastKDF = false

    @Option(help: "Plant a bug in the app (the simulator's self-test): to replay a script `simulate --plant` minimized.")
    var plant: PlantedFault?

    @OptionGroup var keyStore: KeyStoreOptions<FileKeyStoreByDefault>

    var kdf: PasscodeKDF { fastKDF ? .minimal : .default }
}
