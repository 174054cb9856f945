import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// An app's own error, as an app would define it.
private struct NoteTooLong: Error, Equatable {
    let length: Int
}

@MainActor
@Suite("perform: errors, cancellation and deadlines", .timeLimit(.minutes(3)))
struct PerformTests {
    @Test("an app error thrown in a queued operation reaches the caller as the same type, with its value")
    func appErrorKeepsItsType() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        let caller = Task { @MainActor in
            try await fixture.controller.perform("save note") { _ -> Int in throw NoteTooLong(length: 4_096) }
        }
        await fixture.controller.waitUntilIdle()
        #expect(fixture.controller.queuedOperationCount == 1, "the operation waits for the unlock")
        try await fixture.unlock()
        await #expect(throws: NoteTooLong(length: 4_096)) { try await caller.value }
    }

    @Test("an app error thrown while the store is ready reaches the caller unchanged; the outcome keeps it too")
    func appErrorWhenReady() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        var outcomes: [OperationOutcome] = []
        fixture.controller.observe { event in
            if case .operationFinished(let ticket) = event, let outcome = ticket.outcome { outcomes.append(outcome) }
        }
        await #expect(throws: NoteTooLong(length: 7)) {
            try await fixture.controller.perform("save") { _ in throw NoteTooLong(length: 7) }
        }
        guard case .failed(let error) = outcomes.first else {
            Issue.record("expected a failed outcome, got \(outcomes)")
            return
        }
        #expect(error as? NoteTooLong == NoteTooLong(length: 7))
    }

    @Test("a task cancelled while its operation waits: the operation never runs, perform throws CancellationError")
    func cancelledTaskNeverRuns() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        var sideEffect: [String] = []
        let caller = Task { @MainActor in
            try await fixture.controller.perform("write") { coordinator in
                sideEffect.append("ran")
                try await coordinator.put("cancelled", "should not exist")
            }
        }
        await fixture.controller.waitUntilIdle()
        #expect(fixture.controller.queuedOperationNames == ["write"])
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(fixture.controller.queuedOperationCount == 0, "removed from the queue at once")
        try await fixture.unlock()
        #expect(sideEffect.isEmpty)
        #expect(try await fixture.value("cancelled") == nil)
    }

    @Test("a task cancelled before it calls perform does not queue anything")
    func cancelledBeforeSubmitting() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        let caller = Task { @MainActor in
            withUnsafeCurrentTask { $0?.cancel() }
            return try await fixture.controller.perform("never") { _ in 1 }
        }
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(fixture.controller.queuedOperationCount == 0)
    }

    @Test("a manual clock advanced past a deadline expires the waiting operation, with no other call")
    func deadlineExpiresOnAdvance() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.rebootDevice()
        await fixture.launch(LaunchOptions(reason: .location))
        let caller = Task { @MainActor in
            try await fixture.controller.perform("sync", deadline: .seconds(30)) { _ in "synced" }
        }
        await fixture.controller.waitUntilIdle()
        fixture.clock.advance(by: .seconds(29))
        #expect(fixture.controller.queuedOperationCount == 1)
        fixture.clock.advance(by: .seconds(1))
        let error = await #expect(throws: StoreError.self) { try await caller.value }
        #expect(error?.code == .deadlineExceeded)
        #expect(fixture.controller.queuedOperationCount == 0)
    }

    @Test("the attach's error reaches a waiting perform as a StoreError whose cause is the SQLite error")
    func attachErrorKeepsItsCause() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        await fixture.controller.terminate()
        await fixture.controller.waitUntilIdle()
        var bytes = fileBytes(fixture.storePath)
        bytes[100] ^= 0xff
        _ = FileManager.default.createFile(atPath: fixture.storePath, contents: Data(bytes))
        fixture.controller = fixture.makeController()
        fixture.controller.launch()
        let error = await #expect(throws: StoreError.self) {
            try await fixture.controller.perform("read") { try await $0.value(forKey: "k") }
        }
        #expect(error?.code == .storeDamaged)
        #expect((error?.cause as? StoreError)?.resultCode == 26, "the cause is SQLite's own error (SQLITE_NOTADB)")
        #expect(error.map { "\($0.location)".contains("StoreCoordinator.swift") } == true)
    }
}

@MainActor
@Suite("Observing a data controller", .timeLimit(.minutes(3)))
struct ObservationTests {
    @Test("the phase stream sees waiting → launching → ready → waiting → launching → ready across a class-A lock and unlock")
    func phaseStreamAcrossLock() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        try await fixture.rebootDevice()
        let phases = fixture.controller.phases()
        var iterator = phases.makeAsyncIterator()
        #expect(await iterator.next() == .notLaunched, "a new subscriber gets the current phase first")
        await fixture.launch(LaunchOptions(reason: .location))
        try await fixture.unlock()
        await fixture.lock()
        try await fixture.unlock()
        var seen: [DataController.Phase] = []
        for _ in 0..<6 { seen.append(await iterator.next() ?? .terminated) }
        #expect(seen == [.launching, .waitingForProtectedData, .launching, .ready, .waitingForProtectedData, .launching])
        #expect(await iterator.next() == .ready)
        await fixture.controller.terminate()
        #expect(await iterator.next() == .terminated)
        #expect(await iterator.next() == nil, "the stream ends after terminated")
    }

    @Test("a late subscriber gets the current phase first; several observers each see every event, in order")
    func severalObservers() async throws {
        let fixture = try ControllerFixture()
        var first: [String] = []
        var second: [String] = []
        func word(_ event: DataController.Event) -> String {
            switch event {
            case .phaseChanged(let phase): phase.name
            case .operationFinished(let ticket): "finished \(ticket.name)"
            case .inboxMerged(let report): "merged \(report.merged)"
            case .errorPresented(let error): "presented \(error.code)"
            }
        }
        fixture.controller.observe { first.append(word($0)) }
        let observation = fixture.controller.observe { second.append(word($0)) }
        await fixture.launch()
        try fixture.ui("one")
        await fixture.controller.waitUntilIdle()
        observation.cancel()
        try fixture.ui("two")
        await fixture.controller.waitUntilIdle()
        #expect(first == ["launching", "ready", "finished one", "finished two"])
        #expect(second == ["launching", "ready", "finished one"])
        var late = fixture.controller.phases().makeAsyncIterator()
        #expect(await late.next() == .ready)
    }

    @Test("events() delivers an inbox merge and ends when the controller terminates")
    func eventsSequence() async throws {
        let fixture = try ControllerFixture()
        await fixture.launch()
        var events = fixture.controller.events().makeAsyncIterator()
        try fixture.controller.appendToInbox(.put(key: "k", value: "v"))
        await fixture.controller.waitUntilIdle()
        guard case .inboxMerged(let report) = await events.next() else {
            Issue.record("expected an inbox merge first")
            return
        }
        #expect(report.merged.count == 1)
        await fixture.controller.terminate()
        guard case .phaseChanged(.terminated) = await events.next() else {
            Issue.record("expected the terminated phase")
            return
        }
        #expect(await events.next() == nil)
    }
}
