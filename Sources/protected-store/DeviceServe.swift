import ArgumentParser
import Foundation
import LinuxDevice
import ProtectedData
import SecureKeys
import StoreConcurrency
import SystemPackage

extension ProtectedStoreCommand {
    /// The `device …` commands, the device as a service for several processes.
    struct Device: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run the device as a service that several processes share.",
            subcommands: [Serve.self, MigrateKey.self])
    }
}

extension ProtectedStoreCommand.Device {
    /// The `device serve` command, in which one process owns the device state.
    ///
    /// Shells, scripts and apps on the same state directory go through it.
    struct Serve: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Own a state directory's device and serve it to other processes over a Unix socket.",
            discussion: """
                While it runs, `shell` and `run --state-dir` on the same directory are its clients: lock, unlock \
                (wrong passcodes count across every client), the device clock, and store keys — given only while \
                the store's class is available; class keys never leave this process. Protected-data events reach \
                every client. The socket is STATE-DIR/agent/device.sock (0600, in a 0700 directory) — with \
                --session, $XDG_RUNTIME_DIR/protected-store/device-DEV-INODE.sock, named in \
                STATE-DIR/agent/socket-location, so clients still need only the state directory; a peer of \
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

        @OptionGroup var keyStore: KeyStoreOptions<AutomaticKeyStoreByDefault>

        @Flag(
            name: .customLong("session"),
            help: ArgumentHelp(
                "Run the device on the real clock, locked by the user's session (systemd-logind).",
                discussion: """
                    The session's lock, suspend, or a screen saver's ActiveChanged(true) locks the device (grace \
                    period, then class A keys wiped); its unlock is only reported: clients unlock with the passcode. \
                    A device set up while the session is locked comes up locked, class A keys already wiped. \
                    Clients cannot move the clock. The socket is in $XDG_RUNTIME_DIR. When logind leaves the bus \
                    the device locks; when it is back, the session's state is read afresh. When the system bus is \
                    lost the device locks and the agent exits with status 1, so that its systemd unit restarts it \
                    (Restart=on-failure). Fails (no-bus, no-logind, \
                    no-session) when the session cannot be followed, agent-failed without XDG_RUNTIME_DIR.
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
            let runtimeDirectory = try session ? Self.runtimeDirectory() : nil
            // The session first: nothing is made in the state directory when it cannot be followed. Its locks
            // lock the device; nothing it says unlocks it. A lock before the agent exists needs nothing: the
            // agent's device boots before its first unlock, and a set-up asks the session's state (heldLocked).
            let served = LockedState<DeviceAgent?>(nil)
            // A lost system bus locks the device and ends the agent with a failure: its unit restarts it, and the
            // new process follows the session from the start again (a dead connection sees no later lock).
            let lostBus = LockedState<String?>(nil)
            let lockSource = try session
                ? SessionLockSource(systemBus: buses.systemBus, sessionBus: buses.sessionBus) { event in
                    if event.takesKeysAway { served.withLock { $0 }?.lockDevice() }
                    if case .busLost(let bus) = event {
                        lostBus.withLock { $0 = $0 ?? bus }
                        served.withLock { $0 }?.stop()
                    }
                }
                : nil
            defer { lockSource?.stop() }
            let agent = try DeviceAgent(
                stateDirectory: stateDirectory,
                configuration: .init(
                    kdf: fastKDF ? .minimal : .default, maximumClients: maximumClients,
                    keyStore: keyStore.store(for: stateDirectory), realClock: session,
                    runtimeDirectory: runtimeDirectory,
                    heldLocked: lockSource.map(Self.heldLocked(by:))))
            served.withLock { $0 = agent }
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
            if lostBus.withLock({ $0 }) == nil { agent.serve() } else { agent.stop() }
            if let bus = lostBus.withLock({ $0 }) {
                StandardError.write(
                    "error: lost the \(bus): the device is locked and the agent exits, as locks can no longer be seen; "
                        + "its systemd unit restarts it (Restart=on-failure), or start it again")
                throw ExitCode.failure
            }
            if let status = stoppedBy.withLock({ $0 }) { throw ExitCode(status) }
        }

        /// Whether the session holds the device locked now, as the source's events lock it.
        ///
        /// It does when the session is locked or asleep, when logind is gone, or when its bus is lost (a lock can no
        /// longer be seen).
        static func heldLocked(by source: SessionLockSource) -> @Sendable () -> Bool {
            {
                let status = source.status
                return status.isLocked || status.sleeping || !status.logindRunning || !status.connected
            }
        }

        /// `$XDG_RUNTIME_DIR`, where a session agent listens.
        ///
        /// It is the user's own folder, which logind makes and removes at logout. A user service and a login session
        /// have it.
        ///
        /// - Throws: `agent-failed` when it is not set, or not an absolute path.
        static func runtimeDirectory() throws -> String {
            guard let runtime = ProcessInfo.processInfo.environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/") else {
                throw DeviceError.agentFailed(
                    "XDG_RUNTIME_DIR is not set to an absolute path: with --session the agent listens in the user's runtime "
                        + "directory, which a systemd user service and a login session have (/run/user/UID)")
            }
            return runtime
        }
    }
}

/// SIGINT and SIGTERM for `device serve`.
///
/// A plain handler writes the signal's number into a pipe, and a thread reads it and stops the agent.
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
        let reading = FileDescriptor(rawValue: ends[0])
        // Released at once, so detached: it reads until the process exits.
        do {
            _ = try NamedThread(name: "PStore.signals") {
                var number: UInt8 = 0
                while (try? withUnsafeMutableBytes(of: &number) { try reading.read(into: $0) }) == 1 {
                    stop(Int32(number))
                }
            }
        } catch {
            throw ExitCode.failure
        }
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

/// The pipe's writing end, read by the signal handler.
///
/// It is a global first touched (and so initialised) before the handler is installed, so the handler only ever takes
/// the initialised fast path and reads plain memory.
nonisolated(unsafe) private let stopPipe: UnsafeMutablePointer<Int32> = {
    let pointer = UnsafeMutablePointer<Int32>.allocate(capacity: 1)
    pointer.initialize(to: -1)
    return pointer
}()
