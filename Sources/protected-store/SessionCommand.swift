import ArgumentParser
import Foundation
import LinuxDevice
import ProtectedData
import SecureKeys
import TPMKeys
import StoreConcurrency

extension ProtectedStoreCommand {
    /// `session …`, the user's real session lock, as a ``SessionDevice`` follows it.
    struct Session: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show and follow the real session lock (systemd-logind) a session device uses.",
            subcommands: [Status.self, Watch.self])
    }
}

/// The buses of `session status` and `session watch`.
///
/// They are the real ones, or a test's, named explicitly.
struct SessionBusOptions: ParsableArguments {
    @Option(
        name: .customLong("bus-address"),
        help: ArgumentHelp(
            "The D-Bus address of the bus logind is on (tests: a private bus).",
            discussion: "Default: the system bus socket, /run/dbus/system_bus_socket; never $DBUS_SYSTEM_BUS_ADDRESS."))
    var systemBusAddress: String?

    @Option(
        name: .customLong("session-bus-address"),
        help: ArgumentHelp(
            "The D-Bus address of the session bus the screen-saver fallback listens on.",
            discussion: "Default: /run/user/UID/bus; never $DBUS_SESSION_BUS_ADDRESS."))
    var sessionBusAddress: String?

    @Flag(name: .customLong("no-session-bus"), help: "Do not follow the screen savers on the session bus.")
    var noSessionBus = false

    var systemBus: Bus { systemBusAddress.map(Bus.address) ?? .system }
    var sessionBus: Bus? { noSessionBus ? nil : sessionBusAddress.map(Bus.address) ?? .session }

    func validate() throws {
        if noSessionBus && sessionBusAddress != nil {
            throw ValidationError("--no-session-bus and --session-bus-address contradict each other")
        }
        for address in [systemBusAddress, sessionBusAddress].compactMap({ $0 }) where !address.contains(":") {
            throw ValidationError("\(address) is not a D-Bus address (unix:path=/run/…)")
        }
    }
}

extension ProtectedStoreCommand.Session {
    /// `session status` shows what a session device would follow.
    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Say whether the session lock source is found, and the session's state.",
            discussion: """
                Prints the bus, the session followed and how it was found (this process's own session, or — for a \
                user service, which is in no session — the user's display session), whether it is locked \
                (logind's LockedHint, or an active screen saver), the screen savers found on the session bus, \
                the device key source, and — with --state-dir — the device's own state from the agent serving it \
                (a Lock signal or a sleep locks the device but leaves LockedHint as it was). Exit 1 when the lock source cannot be found, with the reason \
                (no-bus, no-logind, no-session).
                """)

        @OptionGroup var buses: SessionBusOptions
        @OptionGroup var logging: LoggingOptions

        @Option(
            name: .customLong("state-dir"),
            help: "A device's state directory: say which key source it uses (default: what a new device would use), and its state, from its agent.")
        var stateDirectory: String?

        @Option(
            name: .customLong("tpm-tcti"),
            help: "How to reach the TPM: a tpm2-tss TCTI (device:/dev/tpmrm0, or swtpm:host=127.0.0.1,port=2321).")
        var tcti = TPMDeviceKeyStore.defaultTCTI

        /// Where the device key is, or would be for a new device.
        ///
        /// It names the TPM or a file, and says why.
        var keySource: String {
            setenv("TSS2_LOG", "all+NONE", 0)
            if let stateDirectory, let kind = DeviceKeyStoreKind.of(directory: stateDirectory) {
                return kind == .tpm
                    ? "tpm (\(stateDirectory)/hardware/uid.tpm, sealed by the TPM)"
                    : "file (\(stateDirectory)/hardware/uid.key, mode 0600; `protected-store device migrate-key --to tpm` moves it into a TPM)"
            }
            let presence = TPMPresence.detect(tcti: tcti)
            return presence.isPresent
                ? "tpm for a new device (TPM \(presence))"
                : "file for a new device (TPM \(presence))"
        }

        func run() throws {
            logging.bootstrap()
            let source: SessionLockSource
            do {
                source = try SessionLockSource(systemBus: buses.systemBus, sessionBus: buses.sessionBus) { _ in }
            } catch {
                print("lock source: not found (\(error.code.name)): \(error.message)")
                print("key source: \(keySource)")
                print("device: \(deviceState)")
                print("core dumps: \(Self.coreDumps)")
                throw ExitCode.failure
            }
            defer { source.stop() }
            let status = source.status
            print("lock source: systemd-logind on the \(status.systemBus)")
            print("session: \(status.session.id) (\(status.session.type), \(status.session.path))")
            print("found by: \(status.session.lookup)")
            print(
                "session locked: \(status.isLocked ? "yes" : "no") (LockedHint \(status.lockedHint), as read now; "
                    + "a Lock signal or a sleep leaves it unchanged: the device line says what the keys did)")
            print("screen saver: \(status.screenSaver)")
            print("key source: \(keySource)")
            print("device: \(deviceState)")
            print("core dumps: \(Self.coreDumps)")
            print("on a lost system bus: \(Self.onLostBus)")
        }

        /// The device's own state, from the agent serving `--state-dir`.
        ///
        /// It tells whether the device is locked, and whether its class A keys are held. That is what a session's
        /// Lock signal or a sleep did, which `LockedHint` does not show.
        var deviceState: String {
            guard let stateDirectory else { return "not asked (--state-dir DIR shows the state of the device its agent serves)" }
            let client: DeviceAgentClient?
            do {
                client = try DeviceAgentClient.connect(toAgentOf: stateDirectory, clientName: "session status")
            } catch {
                return "its agent cannot be asked: \(error)"
            }
            guard let client else {
                return "no agent serves \(stateDirectory): start it (`systemctl --user start protected-store-device.service`, "
                    + "or `protected-store device serve --session --state-dir \(stateDirectory)`)"
            }
            defer { client.disconnect() }
            guard let status = try? client.status() else { return "its agent (process \(client.agentProcessID)) did not answer" }
            guard let lockState = status.lockState else { return "not set up (agent process \(status.agentProcessID))" }
            let classA = status.availability.isAvailable(.complete) ? "available" : "wiped"
            return "\(lockState), class A keys \(classA) (agent process \(status.agentProcessID))"
        }

        /// Whether this process (as every `protected-store` process) can be dumped, in words.
        static var coreDumps: String {
            CoreDumps.isThisProcessDumpable
                ? "on (this process is dumpable: a crash may write its memory to disk)"
                : "off (this process is not dumpable: no core file, no attach by the user's other processes)"
        }

        /// What `device serve --session` does when the system bus goes away, in words.
        static let onLostBus =
            "the device locks; `device serve --session` exits with status 1 and its systemd unit restarts it "
            + "(Restart=on-failure), following the session afresh; logind leaving the bus locks the device, and "
            + "its return is read afresh"
    }

    /// `session watch` shows each real lock, unlock and sleep, as it happens.
    struct Watch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print each session lock, unlock and sleep as it happens, until Ctrl-C.",
            discussion: """
                One line per event: `locked (…)`, `unlocked (…)`, `sleeping`, `resumed`, with where it came from \
                (logind's LockedHint, its Lock/Unlock signal, PrepareForSleep, a screen saver's ActiveChanged). A \
                session device locks on the first three kinds; an unlock is only reported — its keys come back \
                with the passcode alone. Ctrl-C or SIGTERM stops it (exit 130, 143).
                """)

        @OptionGroup var buses: SessionBusOptions
        @OptionGroup var logging: LoggingOptions

        func run() throws {
            logging.bootstrap()
            let stoppedBy = LockedState<Int32?>(nil)
            let stop = DispatchSemaphore(value: 0)
            try StopSignals.install { number in
                stoppedBy.withLock { $0 = $0 ?? 128 + number }
                stop.signal()
            }
            let source = try SessionLockSource(systemBus: buses.systemBus, sessionBus: buses.sessionBus) { event in
                print("\(event)")
                fflush(nil)
            }
            print("watching session \(source.session.id) on the \(buses.systemBus) (\(source.session.lookup)); Ctrl-C stops")
            fflush(nil)
            stop.wait()
            source.stop()
            if let status = stoppedBy.withLock({ $0 }) { throw ExitCode(status) }
        }
    }
}
