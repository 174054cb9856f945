internal import DequeModule
internal import ProtectedData

/// A UI-facing operation, which runs on the main actor with the attached store.
public typealias StoreOperation = @MainActor (StoreCoordinator) async throws -> Void

/// The queue of UI-facing operations submitted before the store is ready.
///
/// Bounded: a full queue refuses a new operation with `queue-full` instead of dropping anything. Each
/// operation leaves exactly once, in submission order: run, failed, cancelled or expired — never silently.
/// Deadlines are instants on the controller's clock (time since it was made).
@MainActor
final class OperationGate {
    struct Entry {
        let ticket: OperationTicket
        let deadline: Timekeeper.Instant?
        let body: StoreOperation
    }

    let capacity: Int
    /// The waiting operations, oldest first. A cancelled or expired one is removed where it stands, so every
    /// element is waiting and `count` needs no bookkeeping beside it.
    private var entries: Deque<Entry> = []
    private var lastID: UInt64 = 0
    /// Called with every ticket as it ends, in the order they end.
    var onFinish: ((OperationTicket) -> Void)?

    init(capacity: Int) {
        precondition(capacity > 0, "the operation queue needs room for at least one operation")
        self.capacity = capacity
    }

    /// Operations waiting to run.
    var count: Int { entries.count }

    /// Names of the waiting operations, in order.
    var names: [String] { entries.map(\.ticket.name) }

    /// The earliest deadline of a waiting operation.
    var earliestDeadline: Timekeeper.Instant? {
        entries.lazy.compactMap(\.deadline).min()
    }

    /// Queues an operation.
    ///
    /// - Throws: `queue-full` when ``capacity`` operations already wait; nothing is queued then.
    func enqueue(name: String, deadline: Timekeeper.Instant?, body: @escaping StoreOperation) throws -> OperationTicket {
        guard entries.count < capacity else { throw StoreError.queueFull(capacity: capacity) }
        lastID += 1
        let ticket = OperationTicket(id: lastID, name: name)
        entries.append(Entry(ticket: ticket, deadline: deadline, body: body))
        return ticket
    }

    /// Takes the next operation to run, ending on the way any whose deadline passed (expired) or whose task
    /// was cancelled.
    func next(now: Timekeeper.Instant) -> Entry? {
        while let entry = entries.popFirst() {
            if entry.ticket.isCancellationRequested {
                finish(entry.ticket, .cancelled)
                continue
            }
            if let deadline = entry.deadline, now >= deadline {
                finish(entry.ticket, .expired)
                continue
            }
            return entry
        }
        return nil
    }

    /// Reports an operation's end.
    func finish(_ ticket: OperationTicket, _ outcome: OperationOutcome) {
        ticket.finish(outcome)
        onFinish?(ticket)
    }

    /// Cancels a waiting operation.
    ///
    /// - Returns: `false` when it is not waiting (it ran, runs now, or already ended).
    @discardableResult
    func cancel(_ ticket: OperationTicket) -> Bool {
        guard let index = entries.firstIndex(where: { $0.ticket === ticket }) else { return false }
        entries.remove(at: index)
        finish(ticket, .cancelled)
        return true
    }

    /// Expires every waiting operation whose deadline has passed, in order.
    func expireOverdue(now: Timekeeper.Instant) {
        var overdue: [OperationTicket] = []
        entries.removeAll { entry in
            guard let deadline = entry.deadline, now >= deadline else { return false }
            overdue.append(entry.ticket)
            return true
        }
        for ticket in overdue { finish(ticket, .expired) }
    }

    /// Ends every waiting operation with `outcome`, in order.
    func finishAll(_ outcome: OperationOutcome) {
        while let entry = entries.popFirst() {
            finish(entry.ticket, outcome)
        }
    }
}
