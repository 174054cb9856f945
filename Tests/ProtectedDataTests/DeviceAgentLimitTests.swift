import TestSupport
import Foundation
import SecureKeys
import Testing

@_spi(DeviceAgentWire) @testable import ProtectedData

/// Clients that push the agent's limits: a runaway clock, a client that stops reading.
@Suite("Device agent: a runaway clock, a client that stops reading", .timeLimit(.minutes(5)))
struct DeviceAgentLimitTests {
    // Before the wire format bounded a clock advance (100 years) and the agent its clock (1,000 years), two
    // advances past Int64.max milliseconds overflowed `Duration.milliseconds` encoding the status, and the agent
    // trapped. DeviceAgentClient no longer sends such a value; a hostile client sends the bytes themselves.
    @Test("a raw client asking for a clock advance of Int64.max milliseconds is refused, and the agent serves on")
    func hugeClockAdvance() throws {
        let fixture = try AgentFixture()
        defer { fixture.stop() }
        let good = try fixture.connect("good")
        let before = try good.status()
        let raw = try fixture.raw()
        try raw.hello()
        // A body of 13 bytes: kind 9 (advance the clock), request id 2, Int64.max milliseconds.
        raw.send([0, 0, 0, 13, 9, 0, 0, 0, 2] + withUnsafeBytes(of: Int64.max.bigEndian) { Array($0) })
        try raw.expectRefusal(naming: "the clock advance is over 100 years")
        try fixture.expectStillServes(before)
        #expect(try good.status().clock == .zero)
    }

    @Test("the device clock stops at 1,000 years: the advance past it is refused and the agent serves on")
    func clockLimit() throws {
        let fixture = try AgentFixture()
        defer { fixture.stop() }
        let client = try fixture.connect("clock")
        for _ in 1...10 { try client.advanceClock(by: AgentWireFormat.maximumRequestDuration) }
        let error = #expect(throws: DeviceError.self) { try client.advanceClock(by: .seconds(1)) }
        #expect(error?.code == .clockLimit)
        #expect(error?.message.contains("would pass 1,000 years") == true, "\(String(describing: error))")
        #expect(try client.status().clock == AgentWireFormat.maximumRequestDuration * 10)
    }

    @Test("a clock step over 100 years (clock-limit), a grace period or path the wire cannot carry (invalid-argument) fails that call alone; the connection stays")
    func outOfRangeValuesFailOneCall() throws {
        let fixture = try AgentFixture()
        defer { fixture.stop() }
        let client = try fixture.connect("values")
        for call in [
            { try client.setUp(passcode: try SecureBytes(utf8: "1"), gracePeriod: .seconds(Int64.max)) },
            { _ = try client.lookUpStoreKey(forStoreAt: "/" + String(repeating: "p", count: 5000)) },
        ] {
            let error = #expect(throws: SecureKeysError.self) { try call() }
            #expect(error?.code == .invalidArgument)
        }
        let step = #expect(throws: DeviceError.self) {
            try client.advanceClock(by: AgentWireFormat.maximumRequestDuration + .milliseconds(1))
        }
        #expect(step?.code == .clockLimit)
        #expect(client.isConnected)
        #expect(try client.status().lockState == .unlocked)
    }

    @Test("a duration of any length, or a negative one, is spoken without trapping")
    func spokenDurations() {
        #expect(Duration.seconds(Int64.max).spoken == "2562047788015215h 30m 7s")
        #expect(Duration.milliseconds(Int64.max).spoken == "2562047788015h 12m 55s")
        #expect(Duration.milliseconds(-1500).spoken == "-1.5s")
        #expect(Duration.milliseconds(250).spoken == "250ms")
        #expect(Duration.seconds(90).spoken == "1m 30s")
        #expect(Duration.zero.spoken == "0s")
    }

    @Test("configuration values outside their range are brought to its nearest end, so none can trap the agent")
    func configurationIsClamped() {
        let low = DeviceAgent.Configuration(maximumClients: 0, requestTimeout: .zero)
        #expect(low.maximumClients == 1 && low.requestTimeout == .milliseconds(1))
        let high = DeviceAgent.Configuration(maximumClients: .max, requestTimeout: .seconds(Int64.max))
        #expect(high.maximumClients == 4096 && high.requestTimeout == .seconds(86_400))
    }

    // Nothing the agent sends waits for a client: a client that stops reading is cut off when its socket's
    // buffer is full, and the others go on at their pace. (Before, SO_SNDTIMEO was set from whole seconds, and a
    // timeout under one second meant none: a client that stopped reading blocked every other.)
    @Test("a client that stops reading is cut off once its buffer is full, and the one that locks and unlocks goes on")
    func clientStopsReading() throws {
        let fixture = try AgentFixture(setUp: .zero)
        defer { fixture.stop() }
        let good = try fixture.connect("good")
        let deaf = try fixture.raw()
        try deaf.hello()  // and never reads again
        fixture.waitForClientCount(2)
        // Every lock and unlock pushes events to the deaf client until its socket's buffer is full.
        let passcode = fixture.passcode
        let cycling = DispatchSemaphore(value: 0)
        Thread {
            defer { cycling.signal() }
            for _ in 0..<5_000 where fixture.agent.clientCount == 2 {
                guard (try? good.lock()) != nil, (try? good.unlock(passcode: try SecureBytes(utf8: passcode))) != nil else { return }
            }
        }.start()
        let cutOff = poll(seconds: 60) { fixture.agent.clientCount == 1 }
        #expect(cutOff, "the client that stopped reading was not cut off")
        if cutOff {
            #expect(cycling.wait(timeout: .now() + 60) == .success)
            #expect(try good.status().lockState == .unlocked)
        }
        withExtendedLifetime(deaf) {}
    }
}
