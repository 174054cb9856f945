import SecureKeys
import Testing
import TestSupport

@testable import ProtectedData
import StoreConcurrency

@Suite("Manual clock", .timeLimit(.minutes(3)))
struct ManualClockTests {
    @Test("now moves only by advance(by:), at once")
    func advanceMovesNow() {
        let clock = ManualClock()
        let start = clock.now
        clock.advance(by: .seconds(3))
        clock.advance(by: .milliseconds(250))
        #expect(start.duration(to: clock.now) == .milliseconds(3250))
    }

    @Test("a sleeper wakes at the advance that reaches its deadline, not before")
    func sleepersWakeAtTheirDeadline() async throws {
        let clock = ManualClock()
        let woken = Woken()
        let late = Task { try await clock.sleep(until: clock.now.advanced(by: .seconds(10))); await woken.append("late") }
        let early = Task { try await clock.sleep(until: clock.now.advanced(by: .seconds(5))); await woken.append("early") }
        try await waitForSleepers(on: clock, count: 2)
        clock.advance(by: .seconds(4))
        #expect(clock.pendingSleepers == 2)
        clock.advance(by: .seconds(1))
        try await early.value
        #expect(await woken.names == ["early"])
        #expect(clock.pendingSleepers == 1)
        clock.advance(by: .seconds(60))
        try await late.value
        #expect(await woken.names == ["early", "late"])
    }

    @Test("a deadline already passed returns at once")
    func pastDeadlineReturnsAtOnce() async throws {
        let clock = ManualClock()
        clock.advance(by: .seconds(1))
        try await clock.sleep(until: clock.now.advanced(by: .seconds(-1)))
        try await clock.sleep(until: clock.now)
    }

    @Test("cancelling a sleeping task ends its sleep with CancellationError; a later advance does not resume it again")
    func cancellationEndsTheSleep() async throws {
        let clock = ManualClock()
        let sleeper = Task { try await clock.sleep(until: clock.now.advanced(by: .seconds(10))) }
        try await waitForSleepers(on: clock, count: 1)
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        clock.advance(by: .seconds(10))
        #expect(clock.pendingSleepers == 0)
    }

    @Test("a task cancelled before it sleeps does not sleep")
    func cancelledBeforeSleeping() async {
        let clock = ManualClock()
        let sleeper = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(until: clock.now.advanced(by: .seconds(10)))
        }
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.pendingSleepers == 0)
    }

    @Test("a timer runs inside the advance that reaches it, in deadline order, with the clock at its deadline")
    func timersRunInsideAdvance() {
        let clock = ManualClock()
        let ran = LockedState<[String]>([])
        let timekeeper = Timekeeper(clock)
        timekeeper.schedule(at: .seconds(5)) { ran.withLock { $0.append("b at \(clock.now.offset)") } }
        timekeeper.schedule(at: .seconds(2)) { ran.withLock { $0.append("a at \(clock.now.offset)") } }
        timekeeper.schedule(at: .seconds(2)) {
            ran.withLock { $0.append("a2 at \(clock.now.offset)") }
            // Scheduled from inside the advance, and due within it: runs in the same advance.
            timekeeper.schedule(at: .seconds(3)) { ran.withLock { $0.append("nested at \(clock.now.offset)") } }
        }
        let cancelled = timekeeper.schedule(at: .seconds(1)) { ran.withLock { $0.append("cancelled") } }
        cancelled.cancel()
        clock.advance(by: .seconds(4))
        #expect(ran.withLock { $0 } == ["a at 2.0 seconds", "a2 at 2.0 seconds", "nested at 3.0 seconds"])
        #expect(clock.now.offset == .seconds(4))
        clock.advance(by: .seconds(1))
        #expect(ran.withLock { $0 }.last == "b at 5.0 seconds")
        #expect(clock.pendingSleepers == 0)
    }

    @Test("advancing past the grace period wipes the class-A key and tells subscribers, with no other call")
    func gracePeriodEndsOnAdvance() throws {
        let directory = TemporaryDirectory()
        let clock = ManualClock()
        let device = try KeybagDevice.setUp(
            in: directory.path, passcode: try SecureBytes(utf8: "1"), configuration: .init(gracePeriod: .seconds(10), kdf: .minimal),
            clock: clock)
        let received = LockedState<[ProtectedDataEvent]>([])
        let subscription = device.subscribe { event in received.withLock { $0.append(event) } }.subscription
        device.lock()
        clock.advance(by: .seconds(9))
        #expect(received.withLock { $0 } == [.willBecomeUnavailable])
        clock.advance(by: .seconds(1))
        #expect(received.withLock { $0 } == [.willBecomeUnavailable, .didBecomeUnavailable])
        #expect(device.classKey(.complete) == nil)
        subscription.cancel()
    }

    private func waitForSleepers(on clock: ManualClock, count: Int) async throws {
        while clock.pendingSleepers < count { try await Task.sleep(for: .milliseconds(1)) }
    }
}

private actor Woken {
    var names: [String] = []
    func append(_ name: String) { names.append(name) }
}
