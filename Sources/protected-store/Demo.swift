import ArgumentParser
import Foundation
import ProtectedData
@_spi(Testing) import ProtectedStore
import ProtectedStoreHarness
import SecureKeys

extension ProtectedStoreCommand {
    /// The locked-device case, narrated, on a temporary state directory that is removed afterwards.
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Walk through a background launch while the device is locked, on a temporary state directory.")

        @MainActor
        func run() async throws {
            let directory = NSTemporaryDirectory() + "protected-store-demo-\(UUID().uuidString)"
            try SecureFile.createDirectory(at: directory)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            try await DemoScript(directory: directory).run()
        }
    }
}

/// The walkthrough itself: a device with a test clock (virtual time, no sleeping), a store, a controller.
@MainActor
final class DemoScript {
    let directory: String
    let clock = ManualClock()
    let started: ManualClock.Instant
    let timeline = Timeline()
    var device: SimulatedDevice!
    var controller: DataController?
    var storePath: String { directory + "/app.sqlite" }

    init(directory: String) {
        self.directory = directory
        started = clock.now
    }

    var now: Duration { started.duration(to: clock.now) }

    /// What callbacks reported while the last action settled, printed under that action's row.
    var pendingNotes: [String] = []

    func record(_ event: String) {
        timeline.record(now, event, device: device, controller: controller)
        for note in pendingNotes { timeline.note(note) }
        pendingNotes.removeAll()
    }

    func makeController() -> DataController {
        let controller = DataController(
            configuration: .init(store: StoreConfiguration(path: storePath, protectionClass: .complete)), keys: device, clock: clock)
        controller.observe { [unowned self] event in
            switch event {
            case .errorPresented(let error):
                pendingNotes.append("error presented to the user: \(error)")
            case .inboxMerged(let report):
                pendingNotes.append("locked inbox: \(report.merged) sealed record\(report.merged == 1 ? "" : "s") merged into the store, in one transaction")
            case .operationFinished(let ticket):
                pendingNotes.append("operation #\(ticket.id) \(ticket.name): \(ticket.outcome.map(String.init(describing:)) ?? "?")")
            case .phaseChanged:
                break
            }
        }
        return controller
    }

    func advance(_ duration: Duration) async {
        clock.advance(by: duration)
        await controller?.waitUntilIdle()
    }

    func settle() async { await controller?.waitUntilIdle() }

    func run() async throws {
        print("""
            protected-store demo: an app is launched in the background while the phone is locked.
            State directory: \(directory) (removed at the end). Time is virtual: nothing sleeps.

            """)
        timeline.header()

        device = try SimulatedDevice.setUp(
            in: directory, passcode: SecureBytes(utf8: "123456"), configuration: .init(gracePeriod: .seconds(10)),
            clock: clock)
        record("device setup (passcode, 10 s grace period)")

        controller = makeController()
        controller!.launch(LaunchOptions(reason: .user))
        await settle()
        record("app launch (user): store created and attached")
        try controller!.submit("save home") { try await $0.put("home", "Rue de Rivoli") }
        await settle()
        controller!.terminate()
        await settle()
        controller = nil
        record("app terminate")

        device = try SimulatedDevice(bootingFrom: directory, clock: clock)
        record("device reboot")
        await advance(.seconds(5))
        record("5 s later")

        controller = makeController()
        controller!.launch(LaunchOptions(reason: .location))
        record("app launch --background --reason location")
        timeline.note("phase 1 returned at once; the store attaches on a background executor")
        await settle()
        record("attach finished: the store key is locked")
        timeline.note("no error shown: protected data is unavailable, so the controller waits for the unlock event")

        try controller!.submit("show-map") { _ in }
        try controller!.submit("save visit") { try await $0.put("visit", "café at 48.86,2.35") }
        try controller!.submit("refresh-list") { _ in }
        await settle()
        record("3 UI operations submitted: queued, not run")

        try controller!.appendToInbox(.put(key: "last-location", value: "48.8606,2.3376"))
        record("location update while locked → locked inbox")
        timeline.note("sealed to the store's inbox public key and fsynced: \(try controller!.inbox.pendingCount()) record waiting; only the store's key can open it")

        await advance(.seconds(30))
        do {
            try device.unlock(passcode: SecureBytes(utf8: "000000"))
        } catch {
            pendingNotes.append("\(error)")
            record("device unlock with a wrong passcode")
        }
        try device.unlock(passcode: SecureBytes(utf8: "123456"))
        await settle()
        pendingNotes.insert("deferred setup: attach, assign the coordinator, enable interaction, drain the queue in order", at: 0)
        record("device unlock → protected data did become available")

        let visit = try await controller!.perform("read visit") { try await $0.value(forKey: "visit") }
        let home = try await controller!.perform("read home") { try await $0.value(forKey: "home") }
        let location = try await controller!.perform("read last-location") { try await $0.value(forKey: "last-location") }
        record("read back through the coordinator")
        timeline.note("visit = \(visit ?? "nil"), home = \(home ?? "nil"), last-location = \(location ?? "nil")")

        device.lock()
        await settle()
        record("device lock → will become unavailable")
        timeline.note("the class-A store closes before its keys go; new UI work queues again")
        try controller!.submit("badge-update") { _ in }
        await settle()
        record("UI operation while locked: queued")

        await advance(.milliseconds(9999))
        record("9.999 s into the grace period")
        await advance(.milliseconds(1))
        record("grace period over → did become unavailable")
        timeline.note("class A keys and the class B private key are zeroed; class C stays until reboot")

        try device.unlock(passcode: SecureBytes(utf8: "123456"))
        await settle()
        record("device unlock → queue drained")

        controller!.terminate()
        await settle()
        record("app terminate")

        print("\nFiles in the state directory (none holds a stored value or SQLite's plaintext header):")
        let markers = ["Rue de Rivoli", "café at", "48.8606", "SQLite format 3"]
        for name in RegularFile.all(under: directory).map(\.name) {
            let bytes = FileManager.default.contents(atPath: directory + "/" + name) ?? Data()
            let found = markers.filter { bytes.range(of: Data($0.utf8)) != nil }
            let note = name.hasPrefix("hardware/") ? "the simulated secure element's device key" : (found.isEmpty ? "no plaintext" : "PLAINTEXT: \(found)")
            print("  " + name.padding(toLength: 24, withPad: " ", startingAt: 0) + String(bytes.count).leftPadded(7) + " bytes  " + note)
        }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}
