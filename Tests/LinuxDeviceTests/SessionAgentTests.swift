import Foundation
import ProtectedData
import SecureKeys
import TestSupport
import Testing

/// `protected-store device serve --session`: the device agent on the real clock, locked by the session, its
/// clients unlocking with the passcode only.
@Suite("device serve --session", .serialized, .enabled(if: MockBuses.available, Comment(rawValue: MockBuses.missing)))
struct SessionAgentTests {
    @Test("the session's lock locks the served device for both its clients; its unlock does not; the clock cannot be moved")
    func servedDeviceFollowsTheSession() async throws {
        let logind = try MockLogind()
        let directory = TemporaryDirectory()
        try KeybagDevice.setUp(
            in: directory.path, passcode: SecureBytes(utf8: SessionDeviceTests.passcode),
            configuration: SessionDeviceTests.configuration
        ).powerOff()
        let runtime = TemporaryDirectory()
        let agent = try Self.startAgent(on: directory.path, logind: logind, runtimeDirectory: runtime.path)
        defer {
            kill(agent.processIdentifier, SIGKILL)
            agent.waitUntilExit()
        }
        // This process has no XDG_RUNTIME_DIR: it finds the agent from the state directory alone.
        let client = try #require(await Self.connect(to: directory.path))
        defer { client.disconnect() }
        let named = try String(contentsOfFile: directory.path + "/agent/socket-location", encoding: .utf8)
        #expect(named.hasPrefix(runtime.path + "/protected-store/device-"), "\(named)")
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/agent/device.sock"))
        // A helper process (a shell) without XDG_RUNTIME_DIR goes through the agent too.
        let shell = try Self.runShell(on: directory.path, input: "status\nquit\n")
        #expect(shell.contains("device agent    process \(agent.processIdentifier)"), "\(shell)")
        // A second client (an app's helper): it shares the one device.
        let helper = try #require(try DeviceAgentClient.connect(toAgentOf: directory.path, clientName: "helper"))
        defer { helper.disconnect() }
        func classAAvailable() -> Bool { (try? client.status())?.availability.isAvailable(.complete) ?? true }

        try client.unlock(passcode: SecureBytes(utf8: SessionDeviceTests.passcode))
        #expect(classAAvailable())
        try logind.setLockedHint(true)
        // The grace period (300 ms) ends on the real clock: nobody moves it.
        #expect(await eventually { !classAAvailable() })
        #expect(try client.status().lockState == .locked)
        #expect(try helper.status().availability.isAvailable(.complete) == false)
        #expect { try client.advanceClock(by: .seconds(1)) } throws: { ($0 as? DeviceError)?.code == .agentRefused }

        try logind.setLockedHint(false)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try client.status().lockState == .locked)
        #expect(try helper.status().lockState == .locked)
        try client.unlock(passcode: SecureBytes(utf8: SessionDeviceTests.passcode))
        #expect(classAAvailable())
        #expect(try helper.status().availability.isAvailable(.complete))
    }

    @Test("a device set up while the session is already locked comes up locked, class A keys wiped at once; an agent started while locked boots its device locked")
    func setUpWhileTheSessionIsLocked() async throws {
        let logind = try MockLogind()
        try logind.setLockedHint(true)
        let directory = TemporaryDirectory()
        let runtime = TemporaryDirectory()
        var agent = try Self.startAgent(on: directory.path, logind: logind, runtimeDirectory: runtime.path)
        defer {
            kill(agent.processIdentifier, SIGKILL)
            agent.waitUntilExit()
        }
        var client = try #require(await Self.connect(to: directory.path))
        // A grace period of an hour: only a lock with no grace period makes class A unavailable now.
        try client.setUp(passcode: SecureBytes(utf8: SessionDeviceTests.passcode), gracePeriod: .seconds(3600))
        var status = try client.status()
        #expect(status.lockState == .locked)
        #expect(!status.availability.isAvailable(.complete))
        #expect(!status.availability.isAvailable(.completeUnlessOpen))
        #expect(status.availability.isAvailable(.completeUntilFirstUserAuthentication))
        // The session's unlock brings nothing back; the passcode does.
        try logind.setLockedHint(false)
        try await Task.sleep(for: .milliseconds(300))
        #expect(try client.status().lockState == .locked)
        try client.unlock(passcode: SecureBytes(utf8: SessionDeviceTests.passcode))
        #expect(try client.status().availability.isAvailable(.complete))
        client.disconnect()

        // The agent again, started while the session is locked, on the device it set up: locked from its boot.
        try logind.setLockedHint(true)
        kill(agent.processIdentifier, SIGTERM)
        agent.waitUntilExit()
        agent = try Self.startAgent(on: directory.path, logind: logind, runtimeDirectory: runtime.path)
        client = try #require(await Self.connect(to: directory.path))
        defer { client.disconnect() }
        status = try client.status()
        #expect(status.lockState == .beforeFirstUnlock)
        #expect(!status.availability.isAvailable(.complete))
    }

    @Test("session status --state-dir shows the device locked, class A wiped, after logind's Lock signal, while LockedHint still says unlocked")
    func sessionStatusShowsTheDevice() async throws {
        let logind = try MockLogind()
        let directory = TemporaryDirectory()
        try KeybagDevice.setUp(
            in: directory.path, passcode: SecureBytes(utf8: SessionDeviceTests.passcode),
            configuration: SessionDeviceTests.configuration
        ).powerOff()
        let runtime = TemporaryDirectory()
        let statusArguments = ["session", "status", "--bus-address", logind.bus.address, "--no-session-bus", "--state-dir", directory.path]
        let stopped = try SessionCommandTests.run(statusArguments)
        #expect(stopped.output.contains("device: no agent serves \(directory.path): start it"), "\(stopped.output)")
        let agent = try Self.startAgent(on: directory.path, logind: logind, runtimeDirectory: runtime.path)
        defer {
            kill(agent.processIdentifier, SIGKILL)
            agent.waitUntilExit()
        }
        let client = try #require(await Self.connect(to: directory.path))
        defer { client.disconnect() }
        try client.unlock(passcode: SecureBytes(utf8: SessionDeviceTests.passcode))
        let unlocked = try SessionCommandTests.run(statusArguments)
        #expect(unlocked.output.contains("device: unlocked, class A keys available (agent process \(agent.processIdentifier))"), "\(unlocked.output)")
        try logind.run("session('c1').Lock()")
        #expect(await eventually { (try? client.status())?.availability.isAvailable(.complete) == false })
        let locked = try SessionCommandTests.run(statusArguments)
        #expect(locked.output.contains("session locked: no"), "\(locked.output)")
        #expect(locked.output.contains("device: locked, class A keys wiped"), "\(locked.output)")
    }

    @Test("device serve --session without XDG_RUNTIME_DIR fails with agent-failed, before anything is made")
    func noRuntimeDirectory() async throws {
        let logind = try MockLogind()
        let directory = TemporaryDirectory()
        let state = directory.path + "/state"
        let errors = Pipe()
        let agent = try Self.startAgent(on: state, logind: logind, runtimeDirectory: nil, errors: errors)
        // An agent that serves instead is stopped, and the test fails, rather than waiting for it forever.
        let ended = await eventually { !agent.isRunning }
        if !ended { kill(agent.processIdentifier, SIGKILL) }
        agent.waitUntilExit()
        #expect(ended, "the agent started without XDG_RUNTIME_DIR")
        #expect(agent.terminationStatus != 0)
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(text.contains("agent-failed"), "\(text)")
        #expect(text.contains("XDG_RUNTIME_DIR"), "\(text)")
        #expect(!FileManager.default.fileExists(atPath: state))
    }

    /// Starts `device serve --session` on `directory`, with `XDG_RUNTIME_DIR` set to `runtimeDirectory` (unset
    /// for `nil`).
    static func startAgent(on directory: String, logind: MockLogind, runtimeDirectory: String?, errors: Pipe? = nil) throws -> Process {
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: SessionCommandTests.binary)
        agent.arguments = [
            "device", "serve", "--session", "--fast-kdf", "--state-dir", directory, "--bus-address", logind.bus.address,
            "--no-session-bus",
        ]
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = runtimeDirectory
        agent.environment = environment
        agent.standardOutput = FileHandle.nullDevice
        agent.standardError = errors ?? FileHandle.nullDevice
        try agent.run()
        return agent
    }

    /// What `protected-store shell --state-dir directory`, without `XDG_RUNTIME_DIR`, prints for `input`.
    static func runShell(on directory: String, input: String) throws -> String {
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: SessionCommandTests.binary)
        shell.arguments = ["shell", "--state-dir", directory]
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = nil
        shell.environment = environment
        let stdin = Pipe()
        let stdout = Pipe()
        shell.standardInput = stdin
        shell.standardOutput = stdout
        shell.standardError = stdout
        try shell.run()
        stdin.fileHandleForWriting.write(Data(input.utf8))
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        shell.waitUntilExit()
        return String(decoding: output, as: UTF8.self)
    }

    /// A client of the agent of `directory`, once it serves.
    static func connect(to directory: String) async -> DeviceAgentClient? {
        var connected: DeviceAgentClient?
        _ = await eventually { connected = try? DeviceAgentClient.connect(toAgentOf: directory, clientName: "test"); return connected != nil }
        return connected
    }
}
