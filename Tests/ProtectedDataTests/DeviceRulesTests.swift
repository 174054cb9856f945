import TestSupport
import Foundation
import SecureKeys
import Testing

@_spi(DeviceAgentWire) @testable import ProtectedData

/// One set of device rules, whoever asks: a library caller, a script, or a client of the device agent.
@Suite("Device rules: what the command line refuses, the device and its agent refuse too", .timeLimit(.minutes(5)))
struct DeviceRulesTests {
    private func setUp(passcode: String, wipeAfter: Int? = nil, grace: Duration = .seconds(10), allowsEmpty: Bool = false) -> String? {
        let directory = TemporaryDirectory()
        return errorCode {
            let device = try KeybagDevice.setUp(
                in: directory.path, passcode: try SecureBytes(utf8: passcode),
                configuration: .init(gracePeriod: grace, attemptPolicy: .init(wipeAfterFailures: wipeAfter), kdf: .minimal),
                clock: ManualClock(), allowsEmptyPasscode: allowsEmpty)
            device.powerOff()
        }
    }

    @Test("set-up refuses an empty passcode not asked for, wipe-after 0 or -1 or over a million, and a grace period over 100 years")
    func setUpChecksTheRules() {
        #expect(setUp(passcode: "") == "invalid-device-setting")
        #expect(setUp(passcode: "", allowsEmpty: true) == nil)
        #expect(setUp(passcode: "1234", wipeAfter: 0) == "invalid-device-setting")
        #expect(setUp(passcode: "1234", wipeAfter: -1) == "invalid-device-setting")
        #expect(setUp(passcode: "1234", wipeAfter: DeviceRules.maximumFailedAttempts + 1) == "invalid-device-setting")
        #expect(setUp(passcode: "1234", wipeAfter: 1) == nil)
        #expect(setUp(passcode: "1234", grace: .seconds(101 * 365 * 24 * 3600)) == "invalid-device-setting")
    }

    @Test("a passcode change to an empty passcode is refused unless asked for")
    func changeToEmptyPasscode() throws {
        let fixture = try DeviceFixture()
        #expect(errorCode { try fixture.device.changePasscode(from: try SecureBytes(utf8: "1234"), to: try SecureBytes(utf8: "")) } == "invalid-device-setting")
        try fixture.device.changePasscode(from: try SecureBytes(utf8: "1234"), to: try SecureBytes(utf8: ""), allowsEmptyPasscode: true)
        try fixture.reboot()
        try fixture.unlock("")
    }

    /// A raw client of an agent with no device yet, after hello; the answer to `request`.
    private func answer(_ request: AgentRequest, setUpFirst: Bool = false) throws -> AgentReply {
        let fixture = try AgentFixture(setUp: setUpFirst ? .seconds(10) : nil)
        defer { fixture.stop() }
        let client = try fixture.raw()
        try client.hello()
        try client.send(request, id: 7)
        // Events the request caused (a set-up makes data available) are pushed with id 0: the answer follows.
        var frame = try client.receive()
        while frame.id == 0, case .event = frame.reply { frame = try client.receive() }
        #expect(frame.id == 7)
        return frame.reply
    }

    private func failureCode(_ reply: AgentReply) -> String? {
        guard case .failure(let failure) = reply else { return nil }
        return failure.code
    }

    @Test("through the wire format, the agent refuses a set-up with an empty passcode (not asked for) and with wipe-after 0")
    func agentRefusesWhatTheCommandLineRefuses() throws {
        #expect(failureCode(try answer(.setUp(passcode: try SecureBytes(utf8: ""), gracePeriod: .seconds(10), wipeAfterFailures: nil))) == "invalid-device-setting")
        #expect(failureCode(try answer(.setUp(passcode: try SecureBytes(utf8: "1234"), gracePeriod: .seconds(10), wipeAfterFailures: 0))) == "invalid-device-setting")
        let allowed = try answer(.setUp(passcode: try SecureBytes(utf8: ""), gracePeriod: .seconds(10), wipeAfterFailures: nil, allowsEmptyPasscode: true))
        guard case .status(let status) = allowed else {
            Issue.record("an empty passcode asked for was refused: \(allowed)")
            return
        }
        #expect(status.lockState == .unlocked)
    }

    @Test("through the wire format, the agent refuses a change to an empty passcode not asked for")
    func agentRefusesEmptyNewPasscode() throws {
        let reply = try answer(.changePasscode(old: try SecureBytes(utf8: "1234"), new: try SecureBytes(utf8: "")), setUpFirst: true)
        #expect(failureCode(reply) == "invalid-device-setting")
    }

    @Test("the allow-empty-passcode byte round-trips, and any value but 0 or 1 is malformed")
    func allowEmptyByteIsChecked() throws {
        let request = AgentRequest.setUp(passcode: try SecureBytes(utf8: ""), gracePeriod: .seconds(1), wipeAfterFailures: 3, allowsEmptyPasscode: true)
        let frame = try AgentWireFormat.encode(request, id: 9)
        var bytes = try frame.withUnsafeBytes { Array($0.dropFirst(AgentWireFormat.headerBytes)) }
        let decoded = try bytes.withUnsafeBytes { try AgentWireFormat.decodeRequest($0) }
        #expect(decoded.request == request)
        bytes[bytes.count - 1] = 2
        #expect(throws: AgentWireFormat.Malformed.self) { try bytes.withUnsafeBytes { try AgentWireFormat.decodeRequest($0) } }
    }
}

/// The same rules through a device agent's client: what the command line allows (an empty passcode asked for)
/// reaches the agent, and what it refuses is refused.
@Suite("Device rules through the agent's client")
struct DeviceRulesThroughClientTests {
    @Test("a client sets up an empty passcode only when it asks for one, and changes to one the same way")
    func emptyPasscodeThroughTheClient() throws {
        let fixture = try AgentFixture(setUp: nil)
        defer { fixture.stop() }
        let client = try fixture.connect("rules")
        defer { client.disconnect() }
        #expect { try client.setUp(passcode: try SecureBytes(utf8: "")) } throws: {
            ($0 as? DeviceError)?.code == .invalidDeviceSetting
        }
        try client.setUp(passcode: try SecureBytes(utf8: ""), allowsEmptyPasscode: true)
        #expect { try client.changePasscode(from: try SecureBytes(utf8: ""), to: try SecureBytes(utf8: "")) } throws: {
            ($0 as? DeviceError)?.code == .invalidDeviceSetting
        }
        try client.changePasscode(from: try SecureBytes(utf8: ""), to: try SecureBytes(utf8: "5678"))
        try client.lock()
        try client.unlock(passcode: try SecureBytes(utf8: "5678"))
    }
}
