import ArgumentParser
import Foundation
import ProtectedData
import ProtectedStoreHarness
import SecureKeys

extension ProtectedStoreCommand {
    /// The locked-device case, narrated, on a temporary state directory that is removed afterwards.
    struct Demo: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Walk through a background launch while the device is locked, on a temporary state directory.")

        @OptionGroup var logging: LoggingOptions

        @MainActor
        func run() async throws {
            logging.bootstrap()
            SignalCleanup.install()
            let directory = try TemporaryStateDirectories.make(prefix: "protected-store-demo")
            defer { TemporaryStateDirectories.remove(directory) }
            try await DemoScript(directory: directory).run()
        }
    }
}

/// The walkthrough itself: the same scenario session the shell, scripts and the simulator drive — a real device
/// and store with a manual clock (virtual time, no sleeping) — one command-language line per step, with a
/// timeline row after each and what the session printed as notes under it.
@MainActor
final class DemoScript {
    let directory: String
    let session: ScenarioSession
    let timeline = Timeline()
    /// What the session printed while the last step ran, shown under that step's row.
    var pendingNotes: [String] = []

    init(directory: String) throws {
        self.directory = directory
        session = try ScenarioSession(stateDirectory: directory)
        session.output = { [unowned self] line in pendingNotes.append(line) }
    }

    /// Runs one line of the command language, then prints the timeline row and the notes.
    func step(_ line: String, _ event: String, notes: [String] = []) async throws {
        guard let command = try ScenarioParser.parse(line) else { return }
        if let failure = await session.execute(command) {
            throw ValidationError("the demo's step `\(line)` did not hold: \(failure)")
        }
        record(event, notes: notes)
    }

    func record(_ event: String, notes: [String] = []) {
        timeline.record(session.now, event, device: session.device, controller: session.controller)
        for note in notes + pendingNotes { timeline.note(note) }
        pendingNotes.removeAll()
    }

    func run() async throws {
        print("""
            protected-store demo: an app is launched in the background while the phone is locked.
            State directory: \(directory) (removed at the end). Time is virtual: nothing sleeps.

            """)
        timeline.header()

        try await step("device setup --passcode 123456 --grace 10s", "device setup (passcode, 10 s grace period)")
        try await step("app launch", "app launch (user): store created and attached")
        try await step("put home \"Rue de Rivoli\"", "save home")
        try await step("app terminate", "app terminate")
        try await step("device reboot", "device reboot")
        try await step("clock advance 5s", "5 s later")
        try await step(
            "app launch --background --reason location", "app launch --background --reason location",
            notes: [
                "phase 1 returned at once; the attach ran on a background executor and found the store key locked",
                "no error shown: protected data is unavailable, so the controller waits for the unlock event",
            ])
        try await step("ui show-map", "UI operation show-map: queued, not run")
        try await step("put visit \"café at 48.86,2.35\"", "UI write save visit: queued")
        try await step("ui refresh-list", "UI operation refresh-list: queued")
        try await step(
            "inbox put last-location 48.8606,2.3376", "location update while locked → locked inbox",
            notes: ["sealed to the store's inbox public key and fsynced; only the store's key can open it"])
        try await step("clock advance 30s", "30 s later")
        try await step("device unlock --passcode 000000", "device unlock with a wrong passcode")
        try await step(
            "device unlock --passcode 123456", "device unlock → protected data did become available",
            notes: ["deferred setup: attach (merging the inbox), assign the coordinator, enable interaction, drain the queue in order"])
        try await step("expect ran show-map refresh-list", "the queued UI operations ran, in order")
        try await step("get visit", "read visit through the coordinator")
        try await step("get home", "read home")
        try await step("get last-location", "read last-location (written while locked)")
        try await step(
            "device lock", "device lock → will become unavailable",
            notes: ["the class-A store closes before its keys go; new UI work queues again"])
        try await step("ui badge-update", "UI operation while locked: queued")
        try await step("clock advance 9999ms", "9.999 s into the grace period")
        try await step(
            "clock advance 1ms", "grace period over → did become unavailable",
            notes: ["class A keys and the class B private key are zeroed; class C stays until reboot"])
        try await step("device unlock --passcode 123456", "device unlock → queue drained")
        try await step("app terminate", "app terminate")

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
