import ArgumentParser
import Foundation
import ProtectedData
import SecureKeys

extension ProtectedStoreCommand {
    /// `device …`: the device as a service for several processes.
    struct Device: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the device as a service that several processes share.",
            subcommands: [Serve.self])
    }
}

extension ProtectedStoreCommand.Device {
    /// `device serve`: one process owns the device state; shells, scripts and apps on the same state directory
    /// go through it.
    struct Serve: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Own a state directory's device and serve it to other processes over a Unix socket.",
            discussion: """
                While it runs, `shell` and `run --state-dir` on the same directory are its clients: lock, unlock \
                (wrong passcodes count across every client), the device clock, and store keys — given only while \
                the store's class is available; class keys never leave this process. Protected-data events reach \
                every client. The socket is STATE-DIR/agent/device.sock (0600, in a 0700 directory); a peer of \
                another user is refused, and so are clients past --max-clients, malformed or oversized requests, \
                no hello within 5 seconds and requests begun but not whole within 5 seconds. The device state is on disk after every \
                change: killing the agent loses nothing. Ctrl-C or SIGTERM stops it and removes its socket (exit 130, 143).
                """)

        @Option(name: .customLong("state-dir"), help: "The state directory to own.")
        var stateDirectory = "protected-store-state"

        @Flag(name: .customLong("fast-kdf"), help: "Argon2id at its minimal cost for a device set up through the agent (tests).")
        var fastKDF = false

        @Option(name: .customLong("max-clients"), help: "Clients served at once; one more is refused until one leaves.")
        var maximumClients = 32

        @OptionGroup var logging: LoggingOptions

        func validate() throws {
            guard (1...1024).contains(maximumClients) else { throw ValidationError("--max-clients must be 1 to 1024") }
        }

        func run() throws {
            logging.bootstrap()
            let agent = try DeviceAgent(
                stateDirectory: stateDirectory,
                configuration: .init(kdf: fastKDF ? .minimal : .default, maximumClients: maximumClients))
            // Ctrl-C and SIGTERM stop it cleanly: the socket goes, the lock with the process (exit 130, 143).
            let stoppedBy = LockedState<Int32?>(nil)
            let stops = [(SIGINT, Int32(130)), (SIGTERM, Int32(143))].map { signalNumber, status in
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
                source.setEventHandler {
                    stoppedBy.withLock { $0 = $0 ?? status }
                    agent.stop()
                }
                source.resume()
                return source
            }
            print("device agent (process \(getpid())) serves \(stateDirectory) at \(agent.socketPath)")
            fflush(nil)
            agent.serve()
            withExtendedLifetime(stops) {}
            if let status = stoppedBy.withLock({ $0 }) { throw ExitCode(status) }
        }
    }
}
