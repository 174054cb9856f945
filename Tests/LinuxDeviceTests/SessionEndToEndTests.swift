import Foundation
@testable import LinuxDevice
import ProtectedData
@_spi(Testing) import ProtectedStore
import SecureKeys
import TestSupport
import Testing

/// An app's `DataController` on a ``SessionDevice``, unchanged: the session's lock closes its class-A store and
/// wipes the keys; only the passcode brings them back and drains what the UI queued meanwhile.
@Suite("SessionDevice end to end", .serialized, .enabled(if: MockBuses.available, Comment(rawValue: MockBuses.missing)))
@MainActor
struct SessionEndToEndTests {
    @Test("a class-A store closes at the session's lock and its key is wiped after the grace period; UI work waits through a session unlock and drains at the passcode")
    func dataControllerFollowsTheSession() async throws {
        let fixture = try SessionDeviceTests.Fixture()
        defer { fixture.device.close() }
        let device = fixture.device
        let controller = DataController(
            configuration: .init(store: .init(path: fixture.directory.file("notes.sqlite"), protectionClass: .complete)),
            keys: device)
        controller.launch()
        await controller.waitUntilIdle()
        #expect(controller.phase == .ready)
        try await controller.perform("put") { try await $0.put("note", "milk") }
        // The class key the store's key is wrapped with, as the device holds it: zeroed at the grace period's end.
        let classKey = try #require(device.device.classKey(.complete))

        try fixture.logind.setLockedHint(true)
        // The store closes at the lock; the key goes when the grace period ends.
        #expect(await eventually { controller.phase == .waitingForProtectedData })
        #expect(controller.coordinator == nil)
        #expect(await eventually { classKey.isWiped })
        #expect(device.device.classKey(.complete) == nil)

        let ran = Recorder<String>()
        _ = try controller.submit("show-notes") { _ in ran.record("show-notes") }
        try fixture.logind.setLockedHint(false)
        #expect(await eventually { fixture.sessionEvents.all.contains(.unlocked(.lockedHint)) })
        try await Task.sleep(for: .milliseconds(100))
        await controller.waitUntilIdle()
        #expect(controller.phase == .waitingForProtectedData)
        #expect(controller.queuedOperationCount == 1)
        #expect(ran.all.isEmpty)

        try fixture.unlock()
        #expect(await eventually { controller.phase == .ready && ran.all == ["show-notes"] })
        await controller.waitUntilIdle()
        #expect(controller.queuedOperationCount == 0)
        #expect(try await controller.perform("get") { try await $0.value(forKey: "note") } == "milk")
        await controller.terminate()
    }

    @Test("PrepareForSleep(true) closes the class-A store the same way")
    func sleepClosesTheStore() async throws {
        let fixture = try SessionDeviceTests.Fixture()
        defer { fixture.device.close() }
        let controller = DataController(
            configuration: .init(store: .init(path: fixture.directory.file("notes.sqlite"), protectionClass: .complete)),
            keys: fixture.device)
        controller.launch()
        await controller.waitUntilIdle()
        #expect(controller.phase == .ready)
        try fixture.logind.prepareForSleep(true)
        #expect(await eventually { controller.phase == .waitingForProtectedData })
        #expect(controller.coordinator == nil)
        await controller.terminate()
    }
}
