import Foundation
import LinuxDevice

/// What the tests of this target need: `dbus-daemon`, and python3-dbusmock under Debian's own Python (the
/// `python3` first on `PATH` may be another one, without the `dbus` module).
enum MockBuses {
    static let daemon = "/usr/bin/dbus-daemon"
    static let python = "/usr/bin/python3"

    /// Whether both are there; checked once.
    static let available: Bool = {
        guard FileManager.default.isExecutableFile(atPath: daemon), FileManager.default.isExecutableFile(atPath: python) else {
            return false
        }
        let probe = Process()
        probe.executableURL = URL(fileURLWithPath: python)
        probe.arguments = ["-c", "import dbus, dbusmock"]
        probe.standardError = FileHandle.nullDevice
        guard (try? probe.run()) != nil else { return false }
        probe.waitUntilExit()
        return probe.terminationStatus == 0
    }()

    static let missing = "dbus-daemon or /usr/bin/python3 -m dbusmock is missing (apt: dbus, python3-dbusmock)"

    /// The bus configuration the tests' daemons run with (`Fixtures/private-bus.conf`).
    static let configuration = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/private-bus.conf").path
}

struct MockBusError: Error, CustomStringConvertible {
    var description: String
}

/// A private `dbus-daemon` for one test, stopped (and waited for) when released or at ``stop()``.
final class PrivateBus {
    let address: String
    private let process = Process()

    init() throws {
        process.executableURL = URL(fileURLWithPath: MockBuses.daemon)
        process.arguments = ["--config-file=\(MockBuses.configuration)", "--print-address", "--nofork"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        // The first line it prints is its address.
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line.append(byte)
        }
        guard let address = String(data: line, encoding: .utf8), address.hasPrefix("unix:") else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw MockBusError(description: "dbus-daemon printed no address")
        }
        self.address = address
    }

    /// The bus, as a lock source is told of it: explicitly.
    var bus: Bus { .address(address) }

    /// Stops the daemon: every connection to it drops.
    func stop() {
        guard process.isRunning else { return }
        // SIGKILL, not `terminate()`: a child spawned from a test thread inherits its blocked signals, SIGTERM
        // among them, and would never see a SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// python3-dbusmock running a template on a private bus, stopped when released.
final class MockService {
    private let process = Process()
    let bus: PrivateBus

    /// Starts `template` on `bus` and waits until its name is owned.
    init(template: String, name: String, on bus: PrivateBus, systemBus: Bool) throws {
        self.bus = bus
        process.executableURL = URL(fileURLWithPath: MockBuses.python)
        process.arguments = ["-m", "dbusmock", systemBus ? "--system" : "--session", "--template", template]
        var environment = ProcessInfo.processInfo.environment
        environment[systemBus ? "DBUS_SYSTEM_BUS_ADDRESS" : "DBUS_SESSION_BUS_ADDRESS"] = bus.address
        process.environment = environment
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        do {
            try MockControl.run(on: bus, "wait_for(\(MockControl.quote(name)))")
        } catch {
            stop()
            throw error
        }
    }

    func stop() {
        guard process.isRunning else { return }
        // SIGKILL, not `terminate()`: a child spawned from a test thread inherits its blocked signals, SIGTERM
        // among them, and would never see a SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// Drives a mock through dbus-python: each call is a short Python script on its own connection.
enum MockControl {
    private static let preamble = """
        import sys, time, dbus
        bus = dbus.bus.BusConnection(sys.argv[1])
        LOGIN = 'org.freedesktop.login1'
        def obj(path, name=LOGIN): return bus.get_object(name, path)
        def mock(path='/org/freedesktop/login1', name=LOGIN): return dbus.Interface(obj(path, name), 'org.freedesktop.DBus.Mock')
        def session(sid): return dbus.Interface(obj('/org/freedesktop/login1/session/' + sid), 'org.freedesktop.login1.Session')
        def properties(path, name=LOGIN): return dbus.Interface(obj(path, name), 'org.freedesktop.DBus.Properties')
        def wait_for(name):
            for _ in range(400):
                if bus.name_has_owner(name): return
                time.sleep(0.025)
            sys.exit('nobody owns ' + name)

        """

    /// Runs `script` (Python, after the preamble) against `bus`.
    static func run(on bus: PrivateBus, _ script: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: MockBuses.python)
        process.arguments = ["-c", preamble + script, bus.address]
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let text = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw MockBusError(description: "mock control failed: \(String(decoding: text, as: UTF8.self))")
        }
    }

    /// A Python string literal.
    static func quote(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "\\'") + "'" }
}

/// A mock logind on a private system bus, with one session of this test's user.
final class MockLogind {
    let bus: PrivateBus
    private(set) var service: MockService
    let processInSession: Bool
    let sessionID = "c1"
    var sessionPath: String { "/org/freedesktop/login1/session/\(sessionID)" }

    /// - Parameter processInSession: whether `GetSessionByPID` finds the session (a desktop app), or answers
    ///   `NoSessionForPID` (a systemd user service).
    init(processInSession: Bool = true, addSession: Bool = true) throws {
        bus = try PrivateBus()
        self.processInSession = processInSession
        service = try MockService(template: "logind", name: "org.freedesktop.login1", on: bus, systemBus: true)
        try Self.configure(bus: bus, sessionPath: sessionPath, sessionID: sessionID, processInSession: processInSession, addSession: addSession)
    }

    /// Answers logind's way, and adds the session (unlocked) when `addSession`.
    private static func configure(
        bus: PrivateBus, sessionPath: String, sessionID: String, processInSession: Bool, addSession: Bool
    ) throws {
        // The template has no GetSessionByPID: it is added the way logind answers.
        let answer =
            processInSession
            ? "ret = dbus.ObjectPath('\(sessionPath)')"
            : "raise dbus.exceptions.DBusException('PID %d does not belong to any known session' % args[0], name='org.freedesktop.login1.NoSessionForPID')"
        var script = "mock().AddMethod('org.freedesktop.login1.Manager', 'GetSessionByPID', 'u', 'o', \(MockControl.quote(answer)))\n"
        // The template's GetUser adds the uid (a number) to a string, a Python TypeError: replaced by logind's answer.
        script += "mock().AddMethod('org.freedesktop.login1.Manager', 'GetUser', 'u', 'o', "
            + "\"ret = dbus.ObjectPath('/org/freedesktop/login1/user/%d' % args[0])\")\n"
        if addSession {
            script += "mock().AddSession('\(sessionID)', 'seat0', dbus.UInt32(\(getuid())), 'tester', True)\n"
        }
        try MockControl.run(on: bus, script)
    }

    /// Stops logind alone: its name loses its owner, the bus stays.
    func stopLogind() { service.stop() }

    /// Starts logind again on the same bus (after ``stopLogind()``, or stopping it now), with the session back
    /// and its `LockedHint` `lockedHint` — set with no signal anyone could take for a change: a fresh logind
    /// recovering its sessions.
    func restartLogind(lockedHint: Bool) throws {
        service.stop()
        service = try MockService(template: "logind", name: "org.freedesktop.login1", on: bus, systemBus: true)
        try Self.configure(bus: bus, sessionPath: sessionPath, sessionID: sessionID, processInSession: processInSession, addSession: true)
        if lockedHint {
            // Set in the mock's own table, without PropertiesChanged: logind restores it from its state files.
            try run(
                """
                mock('\(sessionPath)').AddMethod('org.freedesktop.login1.Session', 'RestoreLockedHint', '', '', \
                "self.props['org.freedesktop.login1.Session']['LockedHint'] = True")
                session('\(sessionID)').RestoreLockedHint()
                """)
        }
    }

    func run(_ script: String) throws { try MockControl.run(on: bus, script) }

    func setLockedHint(_ locked: Bool) throws { try run("session('\(sessionID)').SetLockedHint(\(locked ? "True" : "False"))") }

    func prepareForSleep(_ sleeping: Bool) throws {
        try run("mock().EmitSignal('org.freedesktop.login1.Manager', 'PrepareForSleep', 'b', [\(sleeping ? "True" : "False")])")
    }

    /// Stops logind and the bus.
    func stop() {
        service.stop()
        bus.stop()
    }

    deinit { stop() }
}

/// Waits until `condition` holds, checking every 20 ms, for at most `limit` — a bound on how long a signal may
/// take to cross the bus on a loaded machine, not a measure of speed.
func eventually(
    isolation: isolated (any Actor)? = #isolation, within limit: Duration = .seconds(20), _ condition: () -> Bool
) async -> Bool {
    let clock = ContinuousClock()
    let end = clock.now.advanced(by: limit)
    while clock.now < end {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(20))
    }
    return condition()
}

/// Collects events a handler receives, for a test to read.
final class Recorder<Event: Sendable>: @unchecked Sendable {
    // @unchecked Sendable: `events` is only touched under `lock`.
    private var events: [Event] = []
    private let lock = NSLock()

    func record(_ event: Event) {
        lock.lock()
        events.append(event)
        lock.unlock()
    }

    var all: [Event] {
        lock.lock()
        defer { lock.unlock() }
        return events
    }
}
