import ArgumentParser
import Foundation
import LinuxDevice
import ProtectedData
import SecureKeys

extension ProtectedStoreCommand {
    /// `device …`: the device as a service for several processes.
    struct Device: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the device as a service that several processes share.",
            subcommands: [Serve.self, MigrateKey.self])
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

        @OptionGroup var keyStore: KeyStoreOptions

        @Flag(
            name: .customLong("session"),
            help: ArgumentHelp(
                "Run the device on the real clock, locked by the user's session (systemd-logind).",
                discussion: """
                    The session's lock, suspend, or a screen saver's ActiveChanged(true) locks the device (grace \
                    period, then class A keys wiped); its unlock is only reported: clients unlock with the passcode. \
                    Clients cannot move the clock. Fails (no-bus, no-logind, no-session) when the session cannot be \
                    followed.
                    """))
        var session = false

        @OptionGroup var buses: SessionBusOptions

        @OptionGroup var logging: LoggingOptions

        func validate() throws {
            guard (1...1024).contains(maximumClients) else { throw ValidationError("--max-clients must be 1 to 1024") }
            if !session && (buses.systemBusAddress != nil || buses.sessionBusAddress != nil || buses.noSessionBus) {
                throw ValidationError("--bus-address, --session-bus-address and --no-session-bus go with --session")
            }
        }

        func run() throws {
            logging.bootstrap()
            let agent = try DeviceAgent(
                stateDirectory: stateDirectory,
                configuration: .init(
                    kdf: fastKDF ? .minimal : .default, maximumClients: maximumClients,
                    keyStore: keyStore.store(for: stateDirectory), realClock: session))
            // The session's locks lock the device; nothing it says unlocks it.
            let lockSource = try session
                ? SessionLockSource(systemBus: buses.systemBus, sessionBus: buses.sessionBus) { [agent] event in
                    if event.takesKeysAway { agent.lockDevice() }
                }
                : nil
            defer { lockSource?.stop() }
            // Ctrl-C and SIGTERM stop it cleanly: the socket goes, the lock with the process (exit 130, 143).
            let stoppedBy = LockedState<Int32?>(nil)
            try StopSignals.install { number in
                stoppedBy.withLock { $0 = $0 ?? 128 + number }
                agent.stop()
            }
            print("device agent (process \(getpid())) serves \(stateDirectory) at \(agent.socketPath)")
            if let lockSource {
                print("locked by session \(lockSource.session.id) on the \(buses.systemBus) (\(lockSource.session.lookup))")
            }
            fflush(nil)
            agent.serve()
            if let status = stoppedBy.withLock({ $0 }) { throw ExitCode(status) }
        }
    }
}

/// SIGINT and SIGTERM for `device serve`: a plain handler that writes the signal's number into a pipe, and a
/// thread that reads it and stops the agent.
///
/// Not a dispatch source: one is armed asynchronously, after `resume()` returns, so a signal sent as soon as
/// the agent said it serves could find it unarmed and be ignored (a test's SIGTERM was, and the agent served
/// on). The handler is installed before that line is printed, and only calls `write`, which is
/// async-signal-safe.
enum StopSignals {
    /// Installs the handler and starts the thread that calls `stop` with the signal's number.
    static func install(_ stop: @escaping @Sendable (Int32) -> Void) throws {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw ExitCode.failure }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        // Never blocks in the handler, however many signals pile up unread (one is enough to stop).
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        stopPipe.pointee = ends[1]
        let reading = ends[0]
        Thread {
            var number: UInt8 = 0
            while true {
                let count = read(reading, &number, 1)
                if count < 0 && errno == EINTR { continue }
                guard count == 1 else { return }
                stop(Int32(number))
            }
        }.start()
        for number in [SIGINT, SIGTERM] {
            signal(number) { number in
                let savedErrno = errno
                var byte = UInt8(truncatingIfNeeded: number)
                _ = write(stopPipe.pointee, &byte, 1)
                errno = savedErrno
            }
        }
    }
}

/// The pipe's writing end, read by the signal handler: a global first touched (and so initialised) before the
/// handler is installed, so the handler only ever takes the initialised fast path and reads plain memory.
nonisolated(unsafe) private let stopPipe: UnsafeMutablePointer<Int32> = {
    let pointer = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
    pointer.initialize(to: -1)
    return pointer
}()
