import Foundation

/// The example's entry point: tells the story, step by step, and exits 0 when every step behaved as
/// expected — 1, with what was expected and what happened, when one did not.
@main
@MainActor
enum NotesApp {
    static func main() async {
        let started = ContinuousClock.now
        print("Notes — an app on ProtectedStore's data layer")
        let root = FileManager.default.temporaryDirectory.path + "/notes-example-\(UUID().uuidString)"
        do {
            let story = try NotesStory(root: root)
            try await story.run()
            Watchdog.end()
            try? FileManager.default.removeItem(atPath: root)
            print("\nAll \(NotesStory.stepCount) steps behaved as expected (\((ContinuousClock.now - started).milliseconds)).")
        } catch {
            FileHandle.standardError.write(
                Data("notes: FAILED in step \"\(Watchdog.currentStep)\": \(error)\n(state kept in \(root))\n".utf8))
            exit(1)
        }
    }
}
