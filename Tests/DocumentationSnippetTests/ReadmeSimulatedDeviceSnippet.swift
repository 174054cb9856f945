import Testing

// The README's block on the simulated device as the source of keys, in "Using it in an app"
// (scripts/doc-snippets.py checks that the region is, byte for byte, the README's block).

// snippet.readme-simulated-device
import ProtectedStore
import ProtectedData   // KeybagDevice: not re-exported by ProtectedStore
// snippet.hide

/// The README's first run and later runs of an app on the simulated device.
@MainActor
@Suite("README.md: the simulated device", .timeLimit(.minutes(3)))
struct ReadmeSimulatedDeviceSnippet {
    /// One run of the app, as the README shows it; returns once the store is ready after the unlock.
    static func run(
        isFirstRun: Bool, stateDirectory: String, passcode: String, store: StoreConfiguration
    ) async throws -> (KeybagDevice, DataController) {
        // snippet.show

        // The first run sets up a device, left unlocked as a phone is after its set-up; every later run is a boot,
        // after which nothing is available until the first unlock.
        let device = isFirstRun
            ? try KeybagDevice.setUp(in: stateDirectory, passcode: try SecureBytes(utf8: passcode))
            : try KeybagDevice(bootingFrom: stateDirectory)
        let dataController = DataController(configuration: .init(store: store), keys: device)
        dataController.launch(LaunchOptions(reason: .location, inBackground: true))
        // snippet.hide
        // The first run: ready at once (set up unlocked). A later run: waiting for the first unlock.
        await waitForPhase(dataController) { $0 == (isFirstRun ? .ready : .waitingForProtectedData) }
        // snippet.show
        // Later, when the user types the passcode:
        try device.unlock(passcode: try SecureBytes(utf8: passcode))   // the deferred setup runs, the queue drains
        // snippet.end
        await waitForPhase(dataController) { $0 == .ready }
        return (device, dataController)
    }

    @Test("readme-simulated-device: the first run sets a device up unlocked; a later run boots it, waits and attaches at the unlock")
    func firstRunThenBoot() async throws {
        let stateDirectory = temporaryStateDirectory()
        defer { removeDirectory(stateDirectory) }
        let store = StoreConfiguration(path: stateDirectory + "/app.sqlite")
        let (device, first) = try await Self.run(isFirstRun: true, stateDirectory: stateDirectory, passcode: "1234", store: store)
        try await first.perform("save") { try await $0.put("k", "v") }
        await first.terminate()
        device.powerOff()

        let (rebooted, later) = try await Self.run(isFirstRun: false, stateDirectory: stateDirectory, passcode: "1234", store: store)
        #expect(try await later.perform("read") { try await $0.value(forKey: "k") } == "v")
        await later.terminate()
        rebooted.powerOff()
    }
}
