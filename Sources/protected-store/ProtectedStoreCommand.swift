import ArgumentParser
import LinuxDevice
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `protected-store`: simulates a device and an app's launch around an encrypted store.
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
        await main(nil)
    }
}
