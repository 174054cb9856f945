/// How a queued operation ended. Every submitted operation ends in exactly one of these.
public enum OperationOutcome: Sendable, Hashable {
    /// It ran and returned.
    case completed
    /// It ran and threw, or could never run (the store failed to attach): the error.
    case failed(StoreError)
    /// It was cancelled (or the app terminated) before it ran.
    case cancelled
    /// Its deadline passed before protected data became available.
    case expired
}

/// A receipt for a submitted operation: its name, and its outcome once it has one.
@MainActor
public final class OperationTicket {
    /// The submission order: the first operation is 1.
    public let id: UInt64
    /// The name given at submission.
    public let name: String
    /// How it ended, or `nil` while it waits or runs.
    public private(set) var outcome: OperationOutcome?
    private var waiters: [CheckedContinuation<OperationOutcome, Never>] = []

    init(id: UInt64, name: String) {
        self.id = id
        self.name = name
    }

    /// Waits for the outcome.
    public func result() async -> OperationOutcome {
        if let outcome { return outcome }
        return await withCheckedContinuation { waiters.append($0) }
    }

    /// Records the outcome; each ticket ends exactly once.
    func finish(_ outcome: OperationOutcome) {
        precondition(self.outcome == nil, "operation \(id) (\(name)) finished twice")
        self.outcome = outcome
        let waiting = waiters
        waiters.removeAll()
        for waiter in waiting { waiter.resume(returning: outcome) }
    }
}
