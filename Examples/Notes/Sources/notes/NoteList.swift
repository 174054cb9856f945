import NotesModel
import ProtectedStore

/// The list screen's model: the notes, kept fresh by `DataController.values(tracking:)`.
///
/// The observation is the whole refresh logic. Its first value comes when the store is ready; a new one
/// after every commit that wrote the `notes` table — the app's own writes and the records an inbox merge
/// applies — and none for writes elsewhere. While a lock has closed the store it is silent, and it resumes
/// with a fresh value at the next attach. Its query runs on a reader, off the main actor.
///
/// A screen would redraw on each value; this one prints the count when it changes, and lets the story wait
/// for the value it expects.
@MainActor
final class NoteList {
    /// The notes the list shows, in its order (pinned first, newest first).
    private(set) var notes: [Note] = []
    /// Whether the first value arrived.
    private(set) var hasValue = false
    /// The error that ended the observation, if one did.
    private(set) var failure: (any Error)?

    private var task: Task<Void, Never>?
    private var waiters: [(condition: ([Note]) -> Bool, continuation: CheckedContinuation<[Note], any Error>)] = []

    /// Starts following `controller`'s store; values come once it is ready.
    ///
    /// - Parameter controller: the app's data controller.
    func start(following controller: DataController) {
        let values = controller.values(tracking: { db in try db.fetchAll(Note.self, Note.listQuery) })
        task = Task { @MainActor [weak self] in
            do {
                for try await notes in values { self?.show(notes) }
            } catch {
                self?.fail(error)
            }
        }
    }

    /// Stops following the store.
    func stop() {
        task?.cancel()
        task = nil
    }

    /// The notes once `condition` holds for a value the observation delivered — now, if the latest does.
    ///
    /// - Parameter condition: what the story expects the list to show.
    /// - Throws: the error that ended the observation.
    func notes(where condition: @escaping ([Note]) -> Bool) async throws -> [Note] {
        if let failure { throw failure }
        if hasValue && condition(notes) { return notes }
        return try await withCheckedThrowingContinuation { waiters.append((condition, $0)) }
    }

    private func show(_ newNotes: [Note]) {
        if !hasValue || newNotes.count != notes.count { print("   [list] \(newNotes.count.spelled) notes") }
        notes = newNotes
        hasValue = true
        var waiting: [(condition: ([Note]) -> Bool, continuation: CheckedContinuation<[Note], any Error>)] = []
        for waiter in waiters {
            if waiter.condition(newNotes) { waiter.continuation.resume(returning: newNotes) } else { waiting.append(waiter) }
        }
        waiters = waiting
    }

    private func fail(_ error: any Error) {
        failure = error
        for waiter in waiters { waiter.continuation.resume(throwing: error) }
        waiters = []
    }
}
