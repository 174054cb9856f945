import ProtectedData
import Testing

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

    private func waitForSleepers(on clock: ManualClock, count: Int) async throws {
        while clock.pendingSleepers < count { try await Task.sleep(for: .milliseconds(1)) }
    }
}

private actor Woken {
    var names: [String] = []
    func append(_ name: String) { names.append(name) }
}
