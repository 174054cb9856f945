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
        try SimulatedDevice.setUp(
            in: directory.path, passcode: SecureBytes(utf8: SessionDeviceTests.passcode),
            configuration: SessionDeviceTests.configuration
        ).powerOff()
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: SessionCommandTests.binary)
        agent.arguments = [
            "device", "serve", "--session", "--state-dir", directory.path, "--bus-address", logind.bus.address, "--no-session-bus",
        ]
        agent.standardOutput = FileHandle.nullDevice
        agent.standardError = FileHandle.nullDevice
        try agent.run()
        defer {
            kill(agent.processIdentifier, SIGKILL)
            agent.waitUntilExit()
        }
        var connected: DeviceAgentClient?
        #expect(await eventually { connected = try? DeviceAgentClient.connect(toAgentOf: directory.path, clientName: "test"); return connected != nil })
        let client = try #require(connected)
        defer { client.disconnect() }
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
}
