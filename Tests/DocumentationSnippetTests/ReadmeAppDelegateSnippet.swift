import Testing

// The README's app delegate, in "Using it in an app" (scripts/doc-snippets.py checks that the region is, byte for
// byte, the README's block).

// snippet.readme-app-delegate
import ProtectedStore
// snippet.hide

/// The README's app delegate, driven through a launch, a refresh, saves and a termination.
@MainActor
@Suite("README.md: the app delegate", .serialized, .timeLimit(.minutes(3)))
struct ReadmeAppDelegateSnippet {
    /// The app's documents folder, where the delegate puts its store.
    static var documents = ""
    /// What the delegate showed: each list, each spinner state, each error it presented.
    static var lists: [[(key: String, value: String)]] = []
    static var spinner: [Bool] = []
    static var presented: [String] = []

    /// The app's note: what `save` writes.
    struct Note {
        var id: String
        var text: String

        /// An app's own validation, whose error `perform` rethrows as it is.
        func validate() throws { if text.isEmpty { throw EmptyNote() } }
    }

    struct EmptyNote: Error {}
    // snippet.show

    @MainActor
    final class AppDelegate {
        let dataController: DataController
        var observation: DataController.Observation?

        init(keys: any DataController.KeySource) {   // a KeybagDevice in this package; an OS-backed source in an app
            dataController = DataController(
                configuration: .init(store: StoreConfiguration(path: documents + "/Test.sqlite", protectionClass: .complete)),
                keys: keys)
        }

        func application(didFinishLaunchingWithOptions options: LaunchOptions) -> Bool {
            observation = dataController.observe { event in
                switch event {
                case .errorPresented(let error):
                    // Only when protected data WAS available and the store still failed to attach (damaged file,
                    // wrong key, I/O) — never for the locked-device case.
                    self.presentError(title: "There was an error opening the database.", message: error.message)
                case .phaseChanged(let phase):
                    self.showSpinner(phase != .ready)
                case .inboxMerged, .operationFinished:
                    break
                }
            }
            // Phase 1: returns at once. The store attaches on a background executor; the coordinator exists only
            // in the ready phase. Locked? It waits for the unlock, silently.
            dataController.launch(options)
            return true
        }

        func applicationWillEnterForeground() {
            // Runs now if the store is ready, or — in order, exactly once — when the deferred setup completes.
            _ = try? dataController.submit("refresh-list", deadline: .seconds(30)) { coordinator in
                self.show(try await coordinator.allEntries())
            }
        }

        func applicationWillTerminate() async {
            // Returns once the running operation ended, the store closed (WAL checkpointed) and its key wiped;
            // what still waited fails with `terminated`. From a synchronous callback: Task { await … }.
            await dataController.terminate()
        }

        func save(_ note: Note) async throws {
            // Throws exactly what the closure throws (your own error types included), CancellationError if the
            // calling task is cancelled while it waits (it then never runs), or a StoreError.
            try await dataController.perform("save") { coordinator in
                try note.validate()
                try await coordinator.put(note.id, note.text)
            }
        }
    }
    // snippet.end

    @Test("readme-app-delegate: launched before the first unlock, it waits silently, refreshes and saves once unlocked, and terminates")
    func appDelegateLifecycle() async throws {
        let device = try SnippetDevice()
        Self.documents = device.documents
        Self.lists = []
        Self.spinner = []
        Self.presented = []
        await device.create(StoreConfiguration(path: device.documents + "/Test.sqlite", protectionClass: .complete))
        try await device.reboot()

        let delegate = AppDelegate(keys: device.keys)
        #expect(delegate.application(didFinishLaunchingWithOptions: LaunchOptions(reason: .location, inBackground: true)))
        await waitForPhase(delegate.dataController) { $0 == .waitingForProtectedData }
        delegate.applicationWillEnterForeground()  // queued until the unlock
        #expect(Self.lists.isEmpty)
        #expect(Self.spinner.last == true)

        try device.unlock()
        await waitForPhase(delegate.dataController) { $0 == .ready }
        try await delegate.save(Note(id: "n1", text: "hello"))
        await #expect(throws: EmptyNote.self) { try await delegate.save(Note(id: "n2", text: "")) }
        delegate.applicationWillEnterForeground()
        try await delegate.dataController.perform("after the refresh") { _ in }  // runs after it: submission order
        #expect(Self.lists.count == 2)
        #expect(Self.lists.first?.isEmpty == true)  // the queued refresh ran at the unlock, before the save
        #expect(Self.lists.last?.map(\.key) == ["n1"])
        #expect(Self.lists.last?.map(\.value) == ["hello"])
        #expect(Self.spinner.last == false)
        #expect(Self.presented.isEmpty)  // the locked launch presented nothing

        await delegate.applicationWillTerminate()
        #expect(delegate.dataController.phase == .terminated)
        await #expect(throws: StoreError.self) { try await delegate.save(Note(id: "n3", text: "late")) }
    }
}

extension ReadmeAppDelegateSnippet.AppDelegate {
    func presentError(title: String, message: String) { ReadmeAppDelegateSnippet.presented.append(title + " " + message) }
    func showSpinner(_ visible: Bool) { ReadmeAppDelegateSnippet.spinner.append(visible) }
    func show(_ entries: [(key: String, value: String)]) { ReadmeAppDelegateSnippet.lists.append(entries) }
}
