import TestSupport
import Foundation
import SecureKeys
import Testing

@_spi(DeviceAgentWire) @testable import ProtectedData

/// Bad clients that still get the better of the agent: each test fails until the bug it names is fixed.
@Suite("Device agent: open bugs", .timeLimit(.minutes(5)))
struct DeviceAgentBugTests {
    // DeviceAgent answers advanceClock with status(), whose clock goes through FrameWriter.duration →
    // Duration.milliseconds (SimulatedDevice.swift), `components.seconds * 1000 + …`: past Int64.max
    // milliseconds the multiplication overflows and the agent traps. Any client can send the two requests.
    @Test("a client that advances the clock past Int64.max milliseconds does not crash the agent")
    func hugeClockAdvance() async {
        await #expect(processExitsWith: .success) {
            let fixture = try! AgentFixture()
            let client = try! fixture.connect("clock")
            _ = try? client.advanceClock(by: .milliseconds(Int64.max))
            _ = try? client.advanceClock(by: .milliseconds(1))
            _ = try? client.status()
            let other = try! fixture.connect("other")
            precondition(try! other.status().lockState == .unlocked)
            fixture.stop()
        }
    }

    // DeviceAgent.serve() sets SO_SNDTIMEO from `Int(sendTimeout.components.seconds)`: a sendTimeout under a
    // second becomes 0, which means *no* timeout, so a client that stops reading blocks the broadcast — under
    // the agent's `serial` lock — for good, and every other client with it.
    @Test("with a sendTimeout under a second, a client that stops reading is still cut off", arguments: [1000, 500])
    func clientStopsReading(sendTimeoutMilliseconds: Int) throws {
        let fixture = try AgentFixture(sendTimeout: .milliseconds(sendTimeoutMilliseconds), setUp: .zero)
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
                guard (try? good.lock()) != nil, (try? good.unlock(passcode: SecureBytes(utf8: passcode))) != nil else { return }
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
