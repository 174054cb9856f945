import TestSupport
import Clocks
import Foundation
import SecureKeys
import Testing

@testable import ProtectedData

@Suite("Key-availability monitor", .timeLimit(.minutes(3)))
struct MonitorTests {
    @Test("events arrive in order at every subscriber; a cancelled subscriber gets no more")
    func eventsInOrderToEverySubscriber() async throws {
        let fixture = try DeviceFixture()
        let first = EventRecorder()
        let second = EventRecorder()
        let (_, subscription1) = fixture.device.subscribe(first.record)
        let (availability, subscription2) = fixture.device.subscribe(second.record)
        #expect(availability.isAvailable(.complete))
        fixture.device.lock()
        await fixture.advance(.seconds(10))
        try fixture.unlock()
        subscription2.cancel()
        fixture.device.lock()
        let expected: [ProtectedDataEvent] = [.willBecomeUnavailable, .didBecomeUnavailable, .didBecomeAvailable]
        #expect(first.events == expected + [.willBecomeUnavailable])
        #expect(second.events == expected)
        subscription1.cancel()
    }

    @Test("an event raised by a subscriber while it is being called queues behind the current one")
    func reentrantEventsKeepOrder() throws {
        let fixture = try DeviceFixture(gracePeriod: .zero)
        let recorder = EventRecorder()
        let device = fixture.device
        let (_, subscription) = device.subscribe { event in
            recorder.record(event)
            if event == .willBecomeUnavailable { try? device.unlock(passcode: try SecureBytes(utf8: "1234")) }
        }
        let (_, observer) = device.subscribe { recorder.record($0) }
        device.lock()
        // Each event reaches both subscribers before the next event is delivered.
        #expect(recorder.events == [
            .willBecomeUnavailable, .willBecomeUnavailable, .didBecomeUnavailable, .didBecomeUnavailable,
            .didBecomeAvailable, .didBecomeAvailable,
        ])
        subscription.cancel()
        observer.cancel()
    }

    @Test("subscribing reads the state atomically: an unlock racing with the subscription is never missed")
    func subscriptionRace() async throws {
        for iteration in 0..<200 {
            let fixture = try DeviceFixture()
            try fixture.reboot()
            let device = fixture.device
            let unlocker = Task.detached { try device.unlock(passcode: try SecureBytes(utf8: "1234")) }
            let recorder = EventRecorder()
            let (availability, subscription) = device.subscribe(recorder.record)
            try await unlocker.value
            // Either the subscription saw the device unlocked, or it receives the event: never neither.
            let sawAvailable = availability.isAvailable(.complete)
            let gotEvent = recorder.events.contains(.didBecomeAvailable)
            #expect(sawAvailable != gotEvent, "iteration \(iteration): snapshot \(sawAvailable), event \(gotEvent)")
            subscription.cancel()
        }
    }

    @Test("the AsyncSequence delivers the same events and ends when cancelled")
    func asyncSequence() async throws {
        let fixture = try DeviceFixture()
        try fixture.reboot()
        let (availability, events, subscription) = fixture.device.events()
        #expect(!availability.isAvailable(.complete))
        try fixture.unlock()
        fixture.device.lock()
        subscription.cancel()
        var received: [ProtectedDataEvent] = []
        for await event in events { received.append(event) }
        #expect(received == [.didBecomeAvailable, .willBecomeUnavailable])
    }

    @Test("with timers scheduled, the grace period ends on the clock without anyone asking")
    func timerEndsGracePeriod() async throws {
        let directory = TemporaryDirectory()
        let clock = TestClock<Duration>()
        let device = try KeybagDevice.setUp(
            in: directory.path, passcode: try SecureBytes(utf8: "1"), configuration: .init(kdf: .minimal), clock: clock)
        let (_, events, subscription) = device.events()
        device.lock()
        // The device's timer task sleeps on the clock; advance only once it does (TestClock.checkSuspension
        // throws while a sleep is registered), or an advance to exactly its deadline would leave it asleep.
        var yields = 0
        while (try? await clock.checkSuspension()) != nil, yields < 100_000 {
            await Task.yield()
            yields += 1
        }
        #expect(yields < 100_000, "the device's timer never went to sleep on the clock")
        await clock.advance(by: .seconds(10))
        var received: [ProtectedDataEvent] = []
        for await event in events {
            received.append(event)
            if event == .didBecomeUnavailable { break }
        }
        #expect(received == [.willBecomeUnavailable, .didBecomeUnavailable])
        subscription.cancel()
    }
}

@Suite("Store key look-up", .timeLimit(.minutes(3)))
struct StoreKeyLookupTests {
    @Test("absent until created, available while the class key is held, locked after the grace period; never absent again")
    func threeWayLookup() async throws {
        let fixture = try DeviceFixture()
        let store = fixture.directory.file("store.sqlite")
        guard case .absent = try fixture.device.lookUpStoreKey(forStoreAt: store) else { Issue.record("expected absent"); return }
        let created = try fixture.device.createStoreKey(forStoreAt: store, protectionClass: .complete)
        guard case .available(let key) = try fixture.device.lookUpStoreKey(forStoreAt: store) else { Issue.record("expected available"); return }
        #expect(key.constantTimeEquals(created))
        fixture.device.lock()
        await fixture.advance(.seconds(10))
        guard case .locked(.complete) = try fixture.device.lookUpStoreKey(forStoreAt: store) else { Issue.record("expected locked"); return }
        #expect(errorCode { _ = try fixture.device.createStoreKey(forStoreAt: store, protectionClass: .complete) } == "protected-data-unavailable")
        try fixture.reboot()
        guard case .locked(.complete) = try fixture.device.lookUpStoreKey(forStoreAt: store) else { Issue.record("expected locked after reboot"); return }
    }

    @Test("a class-C store key is locked after a reboot and available from the first unlock")
    func classCAfterReboot() throws {
        let fixture = try DeviceFixture()
        let store = fixture.directory.file("c.sqlite")
        _ = try fixture.device.createStoreKey(forStoreAt: store, protectionClass: .completeUntilFirstUserAuthentication)
        try fixture.reboot()
        guard case .locked = try fixture.device.lookUpStoreKey(forStoreAt: store) else { Issue.record("expected locked"); return }
        try fixture.unlock()
        fixture.device.lock()
        guard case .available = try fixture.device.lookUpStoreKey(forStoreAt: store) else { Issue.record("expected available"); return }
    }

    @Test("a store file without a key file is never given a new key; a damaged key file is an error, not absent")
    func neverCreatesOverExistingData() throws {
        let fixture = try DeviceFixture()
        let store = fixture.directory.file("store.sqlite")
        _ = FileManager.default.createFile(atPath: store, contents: Data("data".utf8))
        #expect(errorCode { _ = try fixture.device.createStoreKey(forStoreAt: store, protectionClass: .complete) } == "store-exists-without-key")
        let other = fixture.directory.file("other.sqlite")
        _ = try fixture.device.createStoreKey(forStoreAt: other, protectionClass: .complete)
        let keyPath = StoreFiles(database: other).key
        var bytes = try SecureFile.read(keyPath)
        bytes[40] ^= 1
        try SecureFile.writeAtomically(bytes, to: keyPath, replacing: true, in: .real)
        #expect(errorCode { _ = try fixture.device.lookUpStoreKey(forStoreAt: other) } == "key-file-damaged")
        #expect(try SecureFile.read(keyPath) == bytes)
    }
}
