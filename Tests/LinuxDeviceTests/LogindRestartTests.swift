import Foundation
import LinuxDevice
import ProtectedData
import SecureKeys
import TestSupport
import Testing

/// A session device while logind restarts or leaves the bus, and a served device while the system bus goes away
/// and comes back: locks are never missed, and a lost lock source fails closed.
@Suite("logind and bus restarts", .serialized, .enabled(if: MockBuses.available, Comment(rawValue: MockBuses.missing)))
struct LogindRestartTests {
    /// Waits until the events logind's restart causes (its leaving, its return) have been delivered, so that a
    /// later unlock is not undone by one of them arriving late.
    static func settle(_ fixture: SessionDeviceTests.Fixture) async throws {
        _ = await eventually(within: .seconds(3)) {
            fixture.sessionEvents.all.contains { event in
                switch event {
                case .locked(.logindReturned), .unlocked(.logindReturned), .locked(.lockedHintUnreadable): true
                default: false
                }
            }
        }
        try await Task.sleep(for: .milliseconds(200))
    }

    @Test("logind restarting with the session unlocked: after the passcode, the next SetLockedHint(true) locks again")
    func restartUnlockedThenLockAgain() async throws {
        let fixture = try SessionDeviceTests.Fixture()
        defer { fixture.device.close() }
        try fixture.logind.setLockedHint(true)
        #expect(await eventually { !fixture.device.isProtectedDataAvailable(for: .complete) })
        // logind comes back with the session unlocked, and says nothing.
        try fixture.logind.restartLogind(lockedHint: false)
        try await Self.settle(fixture)
        try fixture.unlock()
        #expect(fixture.classAStoreKeyAvailable)
        try fixture.logind.setLockedHint(true)
        #expect(await eventually { !fixture.device.isProtectedDataAvailable(for: .complete) })
        #expect(!fixture.classAStoreKeyAvailable)
    }

    @Test("logind coming back with the session already locked locks the device unlocked by its passcode meanwhile")
    func restartLocked() async throws {
        let fixture = try SessionDeviceTests.Fixture()
        defer { fixture.device.close() }
        try fixture.logind.setLockedHint(true)
        #expect(await eventually { !fixture.device.isProtectedDataAvailable(for: .complete) })
        fixture.logind.stopLogind()
        try await Task.sleep(for: .milliseconds(500))
        try fixture.unlock()
        #expect(fixture.classAStoreKeyAvailable)
        // Back, with the session locked and no PropertiesChanged: only reading it afresh tells.
        try fixture.logind.restartLogind(lockedHint: true)
        #expect(await eventually { !fixture.device.isProtectedDataAvailable(for: .complete) })
        #expect(fixture.device.lockState == .locked)
        #expect(fixture.device.lockSource.status.logindRunning)
    }

    @Test("logind leaving the bus locks the device: its locks can no longer be seen")
    func logindVanishedLocks() async throws {
        let fixture = try SessionDeviceTests.Fixture()
        defer { fixture.device.close() }
        #expect(fixture.classAStoreKeyAvailable)
        fixture.logind.stopLogind()
        #expect(await eventually { !fixture.device.isProtectedDataAvailable(for: .complete) })
        #expect(fixture.sessionEvents.all.contains(.locked(.logindGone)))
        #expect(!fixture.device.lockSource.status.logindRunning)
        #expect(fixture.device.lockSource.status.connected)
    }

    @Test("the system bus going away locks the served device and ends the agent with a failure; started again on the bus come back, it follows the session's locks")
    func busLossEndsTheAgent() async throws {
        let directory = TemporaryDirectory()
        try KeybagDevice.setUp(
            in: directory.path, passcode: SecureBytes(utf8: SessionDeviceTests.passcode),
            configuration: SessionDeviceTests.configuration
        ).powerOff()
        let runtime = TemporaryDirectory()
        let logind = try MockLogind()
        let errors = Pipe()
        let agent = try SessionAgentTests.startAgent(
            on: directory.path, logind: logind, runtimeDirectory: runtime.path, errors: errors)
        defer {
            if agent.isRunning { kill(agent.processIdentifier, SIGKILL) }
            agent.waitUntilExit()
        }
        let client = try #require(await SessionAgentTests.connect(to: directory.path))
        try client.unlock(passcode: SecureBytes(utf8: SessionDeviceTests.passcode))
        logind.stop()
        // An agent that serves on, on its dead connection, is stopped and the test fails.
        let ended = await eventually(within: .seconds(10)) { !agent.isRunning }
        if !ended { kill(agent.processIdentifier, SIGKILL) }
        agent.waitUntilExit()
        client.disconnect()
        #expect(ended, "the agent served on after losing the system bus")
        #expect(agent.terminationReason == .exit && agent.terminationStatus == 1)
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(text.contains("lost the bus at \(logind.bus.address)"), "\(text)")

        // The bus is back (logind with it): the agent started again follows the session.
        let back = try MockLogind()
        let again = try SessionAgentTests.startAgent(on: directory.path, logind: back, runtimeDirectory: runtime.path)
        defer {
            kill(again.processIdentifier, SIGKILL)
            again.waitUntilExit()
        }
        let second = try #require(await SessionAgentTests.connect(to: directory.path))
        defer { second.disconnect() }
        try second.unlock(passcode: SecureBytes(utf8: SessionDeviceTests.passcode))
        #expect(try second.status().availability.isAvailable(.complete))
        try back.setLockedHint(true)
        #expect(await eventually { (try? second.status())?.availability.isAvailable(.complete) == false })
    }
}
