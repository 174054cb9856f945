import DiskModel
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
            try await SignalCleanup.run(endsOnBrokenPipe: true) { try await work() }
        }

        /// The command itself, inside the signal clean-up's watch.
        @MainActor
        private func work() async throws {
            let directory = try TemporaryStateDirectories.make(prefix: "protected-store-demo")
            defer { TemporaryStateDirectories.remove(directory) }
            let demo = try DemoScript(directory: directory)
            // A step that does not hold leaves the app running: it ends before the directory goes and the process exits.
            do {
                try await demo.run()
            } catch {
                await demo.session.end()
                throw error
            }
            await demo.session.end()
        }
    }
}

/// The walkthrough itself, one command-language line per step.
///
/// It drives the same scenario session the shell, scripts and the simulator drive, a real device and store with a
/// manual clock (virtual time, no sleeping). Each step comes with what a phone would be doing and why the store
/// waits, in words for someone who has never built an iOS app, then what the session printed and the state after it.
/// Every line fits ``Timeline/width`` columns (a test checks).
@MainActor
final class DemoScript {
    let directory: String
    let session: ScenarioSession
    let timeline = Timeline()
    /// What the session printed while the last step ran, shown under that step.
    var pendingNotes: [String] = []

    init(directory: String) throws {
        self.directory = directory
        session = try ScenarioSession(stateDirectory: directory)
        session.output = { [unowned self] line in pendingNotes.append(line) }
    }

    /// Runs one line of the command language, then prints what it means, the notes, and the state after it.
    func step(_ line: String, _ explanation: String, notes: [String] = []) async throws {
        guard let command = try ScenarioParser.parse(line) else { return }
        timeline.step(session.now, Self.shown(command))
        if let failure = await session.execute(command) {
            throw ValidationError("the demo's step `\(line)` did not hold: \(failure)")
        }
        timeline.explain(explanation)
        for note in notes + pendingNotes { timeline.note(note) }
        pendingNotes.removeAll()
        timeline.state(device: session.device, controller: session.controller)
    }

    /// The command as typed, its passcodes hidden.
    ///
    /// A demo's passcode is no secret, but output never shows one.
    static func shown(_ command: ScenarioCommand) -> String {
        let hidden: ScenarioPasscode = "••••••"
        switch command {
        case .deviceSetup(.some, let grace, let wipeAfter, let allowEmpty):
            return ScenarioCommand.deviceSetup(passcode: hidden, grace: grace, wipeAfter: wipeAfter, allowEmptyPasscode: allowEmpty)
                .scriptLine
        case .deviceUnlock(.some): return ScenarioCommand.deviceUnlock(passcode: hidden).scriptLine
        case .deviceChangePasscode(_, _, let allowEmpty):
            return ScenarioCommand.deviceChangePasscode(old: hidden, new: hidden, allowEmptyPasscode: allowEmpty).scriptLine
        default: return command.scriptLine
        }
    }

    func run() async throws {
        for paragraph in [
            "protected-store demo: an app woken up in the background while the phone is locked.",
            """
            A phone encrypts each app's files with keys that exist in memory only while the phone is unlocked \
            (or, for some files, since the passcode was first typed after a restart). Apps are still started \
            while the phone sits locked in a pocket: to record a location, to handle a notification. An app \
            that opens its encrypted store then finds no key, and must neither crash nor show an error that \
            nobody will read: it has to wait for the unlock, and keep what the user asked for until then.
            """,
            """
            This demo plays that out on a simulated phone with a real encrypted SQLite store, on a virtual \
            clock: nothing sleeps. Each step shows the clock, the command (the language of `protected-store \
            shell`), what a phone would be doing, and then the state: the phone; the store (waiting: no key \
            yet; ready: open and usable); whether the app's screens may act (UI); and how many UI operations \
            are queued until the store is ready.
            """,
        ] {
            timeline.explainParagraph(paragraph)
        }
        print("Working in a temporary folder, removed at the end:\n  " + directory + "\n")

        try await step(
            "device setup --passcode 123456 --grace 10s",
            """
            Set up a phone with a passcode. Like an iPhone, it keeps the keys that protect app files locked \
            away under the passcode and takes them out only when the passcode is typed. After the screen \
            locks, it keeps them for a grace period (10 seconds here), then wipes them from memory.
            """)
        try await step(
            "app launch",
            """
            The user taps the app's icon. The phone is unlocked, so the app creates its store, takes its key \
            and opens it at once: the store is ready and the screens can use it.
            """)
        try await step(
            "put home \"Rue de Rivoli\"",
            "The app saves the user's home address. On disk it is encrypted; only the store's key can read it.")
        try await step("app terminate", "The user closes the app.")
        try await step(
            "device reboot",
            """
            The phone restarts. Every key that was in memory is gone, and none can be recovered until \
            someone types the passcode: not by the app, not by the phone itself.
            """)
        try await step("clock advance 5s", "Five seconds pass. The phone is on its lock screen, in a pocket.")
        try await step(
            "app launch --background --reason location",
            """
            The phone moved, so it wakes the app in the background to record a location, while still locked. \
            The phone restarted and nobody has typed the passcode yet, so the key that decrypts the store does \
            not exist in memory. The app finishes launching at once (phase 1), then tries to open its store \
            in the background (phase 2) and finds the store key locked. That is expected, not a failure: no \
            error is shown, and the store waits for the phone to say that protected data became available.
            """)
        try await step(
            "ui show-map",
            """
            Something asks the app's screens to show the map, which needs the store. It is queued, not run \
            and not dropped: it runs when the store is ready.
            """)
        try await step(
            "put visit \"café at 48.86,2.35\"", "A write from the screens (save a visit) is queued the same way.")
        try await step("ui refresh-list", "So is a refresh of the list: three operations wait, in order.")
        try await step(
            "inbox put last-location 48.8606,2.3376",
            """
            A new location arrives. The store cannot be opened, but the data must not be lost, so the app \
            writes it to the store's inbox: sealed with a public key, which needs no secret, and flushed to \
            disk. Only the store's own key can open it; it is merged into the store once the store opens.
            """)
        try await step("clock advance 30s", "Half a minute later the user takes the phone out of the pocket.")
        try await step(
            "device unlock --passcode 000000",
            """
            They mistype the passcode (passcodes are shown as dots). The phone refuses it; nothing else \
            changes, and the store keeps waiting.
            """)
        try await step(
            "device unlock --passcode 123456",
            """
            The right passcode. The phone takes the keys out again and tells the app that protected data did \
            become available. Now the setup that had to wait runs: open the store, merge the inbox, hand the \
            store to the screens, enable them, and run the queued operations in the order they were asked \
            for, each exactly once.
            """)
        try await step(
            "expect ran show-map refresh-list", "A check: the queued UI operations ran, in order, after the unlock.")
        try await step("get visit", "Read back the visit that was saved while the phone was locked:")
        try await step("get home", "the home address saved before the restart:")
        try await step("get last-location", "and the location that was written to the inbox while the store was locked.")
        try await step(
            "device lock",
            """
            The user locks the phone. This store uses the strictest protection (its key may exist only while \
            the phone is unlocked), so the app closes it now, before the keys go, and queues new UI work again.
            """)
        try await step("ui badge-update", "A badge update arrives while locked: queued.")
        try await step(
            "clock advance 9999ms",
            "Almost ten seconds: the phone still holds the keys, in case the user unlocks again right away.")
        try await step(
            "clock advance 1ms",
            """
            The grace period is over: the phone wipes (zeroes) the keys of the strictly protected files. Keys \
            of files that are readable after the first unlock stay until the next restart.
            """)
        try await step(
            "device unlock --passcode 123456",
            "Unlocked again: the store opens, and the queued badge update runs.")
        try await step("app terminate", "The user closes the app.")

        timeline.explainParagraph(
            """
            What is on disk now. None of these files holds a saved value in plain text, nor SQLite's plain file \
            header: everything is encrypted.
            """)
        let markers = ["Rue de Rivoli", "café at", "48.8606", "SQLite format 3"]
        func plaintext(in name: String) -> [String] {
            let bytes = FileManager.default.contents(atPath: directory + "/" + name) ?? Data()
            return markers.filter { bytes.range(of: Data($0.utf8)) != nil }
        }
        // The simulated disk's bookkeeping is not the app's: earlier versions of files that were replaced, kept
        // under .disk-model/ so that a simulated power cut could bring them back. Scanned, not listed.
        let model = ".disk-model/"  // SimulatedDisk's folder (SecureKeys), named there
        let files = RegularFile.all(under: directory)
        let listed = files.filter { !$0.name.hasPrefix(model) }
        let kept = files.filter { $0.name.hasPrefix(model) }
        let nameWidth = listed.map(\.name.count).max() ?? 0
        for file in listed {
            let found = plaintext(in: file.name)
            let note = file.name.hasPrefix("hardware/") ? "the simulated secure element's key" : (found.isEmpty ? "no plaintext" : "PLAINTEXT: \(found)")
            let start = "  " + file.name.padding(toLength: nameWidth, withPad: " ", startingAt: 0) + String(file.size).leftPadded(7) + " bytes  "
            for line in timeline.wrap(note, first: start, rest: String(repeating: " ", count: start.count)) { print(line) }
        }
        if !kept.isEmpty {
            let found = kept.flatMap { plaintext(in: $0.name) }
            print("")
            timeline.explainParagraph(
                "Not listed: \(kept.count) file\(kept.count == 1 ? "" : "s") in \(model), the simulated disk's bookkeeping: earlier "
                    + "versions of files that were replaced, kept so that a simulated power cut can bring them back, and removed "
                    + "with the folder. " + (found.isEmpty ? "No plaintext in them either." : "PLAINTEXT in them: \(Set(found).sorted())"))
        }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}
