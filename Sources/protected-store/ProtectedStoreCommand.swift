import ArgumentParser
import LinuxDevice
import ProtectedStore
import Glibc

/// `protected-store` simulates a device and an app's launch around an encrypted store.
@main
struct ProtectedStoreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protected-store",
        abstract: "An encrypted SQLite store that survives launches while the device is locked.",
        discussion: """
            Shell completion: `protected-store --generate-completion-script bash|zsh|fish` prints a completion \
            script for that shell.
            """,
        version: ToolVersion.current,
        subcommands: [Demo.self, Shell.self, Run.self, Simulate.self, Device.self, Session.self, Store.self]
    )

    static func main() async {
        // Every command may hold keys (the agent, a shell, a store command): no core file, no attach by the
        // user's other processes, from before the first key is read.
        CoreDumps.disableForThisProcess()
        // A write past the file-size limit (`ulimit -f`) would end the process with SIGXFSZ; ignored, the
        // write fails with EFBIG instead, which the store reports as disk-full and the command prints.
        signal(SIGXFSZ, SIG_IGN)
        StandardStreams.prepare()
        // `main(nil)` as ArgumentParser writes it, with a check before each way out.
        do {
            var command = try await asyncParseAsRoot(nil)
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exitUnlessStoreThreadsRun(status: ExitCode.success)
        } catch {
            exitUnlessStoreThreadsRun(status: exitCode(for: error))
            exit(withError: error)
        }
    }

    /// Returns when no store thread runs, so the process may exit normally.
    ///
    /// Otherwise it ends the process at once.
    ///
    /// A store thread still running here is a command that left a store open — a bug of this tool. `exit`
    /// would run the libraries' exit handlers under it (OpenSSL frees the tables SQLCipher's close still uses:
    /// SIGSEGV), so the process ends with `_exit` and status 70 (`EX_SOFTWARE`) after saying so, and the test
    /// that ran the command fails on it.
    private static func exitUnlessStoreThreadsRun(status: ExitCode) {
        let running = StoreThreadCensus.liveCount
        guard running > 0 else { return }
        StandardError.write(
            "internal error: \(running) store thread\(running == 1 ? " was" : "s were") still running at exit (a store left open); "
                + "the command's status would have been \(status.rawValue)")
        fflush(nil)
        _exit(70)
    }
}
