internal import ProtectedData

/// A UI-facing operation: runs on the main actor with the attached store.
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
    private var entries: [Entry?] = []
    private var head = 0
    private var waiting = 0
    private var lastID: UInt64 = 0
    /// Called with every ticket as it ends, in the order they end.
    var onFinish: ((OperationTicket) -> Void)?

    init(capacity: Int) {
        precondition(capacity > 0, "the operation queue needs room for at least one operation")
        self.capacity = capacity
    }

    /// Operations waiting to run.
    var count: Int { waiting }

    /// Names of the waiting operations, in order.
    var names: [String] { entries[head...].compactMap { $0?.ticket.name } }

    /// The earliest deadline of a waiting operation.
    var earliestDeadline: Timekeeper.Instant? {
        entries[head...].lazy.compactMap { $0?.deadline }.min()
    }

    /// Queues an operation.
    ///
    /// - Throws: `queue-full` when ``capacity`` operations already wait; nothing is queued then.
    func enqueue(name: String, deadline: Timekeeper.Instant?, body: @escaping StoreOperation) throws -> OperationTicket {
        guard waiting < capacity else { throw StoreError.queueFull(capacity: capacity) }
        lastID += 1
        let ticket = OperationTicket(id: lastID, name: name)
        entries.append(Entry(ticket: ticket, deadline: deadline, body: body))
        waiting += 1
        return ticket
    }

    /// Takes the next operation to run, ending on the way any whose deadline passed (expired) or whose task
    /// was cancelled.
    func next(now: Timekeeper.Instant) -> Entry? {
        while head < entries.count {
            let entry = entries[head]
            entries[head] = nil
            head += 1
            guard let entry else { continue }
            waiting -= 1
            if entry.ticket.isCancellationRequested {
                finish(entry.ticket, .cancelled)
                continue
            }
            if let deadline = entry.deadline, now >= deadline {
                finish(entry.ticket, .expired)
                continue
            }
            compactIfNeeded()
            return entry
        }
        compactIfNeeded()
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
        guard let index = entries[head...].firstIndex(where: { $0?.ticket === ticket }) else { return false }
        entries[index] = nil
        waiting -= 1
        finish(ticket, .cancelled)
        return true
    }

    /// Expires every waiting operation whose deadline has passed.
    func expireOverdue(now: Timekeeper.Instant) {
        for index in entries.indices[head...] {
            guard let entry = entries[index], let deadline = entry.deadline, now >= deadline else { continue }
            entries[index] = nil
            waiting -= 1
            finish(entry.ticket, .expired)
        }
    }

    /// Ends every waiting operation with `outcome`, in order.
    func finishAll(_ outcome: OperationOutcome) {
        while head < entries.count {
            let entry = entries[head]
            entries[head] = nil
            head += 1
            if let entry {
                waiting -= 1
                finish(entry.ticket, outcome)
            }
        }
        compactIfNeeded()
    }

    private func compactIfNeeded() {
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }
}
