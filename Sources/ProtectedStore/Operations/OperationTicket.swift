internal import SecureKeys
import StoreConcurrency

/// How a queued operation ended. Every submitted operation ends in exactly one of these.
public enum OperationOutcome: Sendable, CustomStringConvertible {
    /// It ran and returned.
    case completed
    /// It ran and threw, or it could never run.
    ///
    /// The error is the one its body threw, unchanged, or a `StoreError` when the store failed to attach.
    case failed(any Error)
    /// It was cancelled before it ran.
    ///
    /// Its task was cancelled, ``DataController/cancel(_:)`` was called, or the app terminated.
    case cancelled
    /// Its deadline passed before protected data became available.
    case expired

    /// The outcome's name alone, for logs.
    ///
    /// A failure's error is the app's and may hold its data.
    var logName: String {
        switch self {
        case .completed: "completed"
        case .failed(let error): (error as? StoreError).map { "failed(\($0.code))" } ?? "failed"
        case .cancelled: "cancelled"
        case .expired: "expired"
        }
    }

    /// `completed`, `failed(…)`, `cancelled` or `expired`.
    public var description: String {
        switch self {
        case .completed: "completed"
        case .failed(let error): "failed(\(error))"
        case .cancelled: "cancelled"
        case .expired: "expired"
        }
    }
}

/// A receipt for a submitted operation.
///
/// It holds its name, and its outcome once it has one.
@MainActor
public final class OperationTicket {
    /// The submission order.
    ///
    /// The first operation is 1.
    public let id: UInt64
    /// The name given at submission.
    public let name: String
    /// How it ended, or `nil` while it waits or runs.
    public private(set) var outcome: OperationOutcome?
    private var waiters: [CheckedContinuation<OperationOutcome, Never>] = []
    /// Set from any thread when the task waiting for this operation is cancelled.
    ///
    /// The queue checks it before it runs the operation, so a cancelled operation never runs even if its removal
    /// has not happened yet.
    private nonisolated let cancellationRequested = LockedState(false)

    init(id: UInt64, name: String) {
        self.id = id
        self.name = name
    }

    /// Waits for the outcome.
    public func result() async -> OperationOutcome {
        if let outcome { return outcome }
        return await withCheckedContinuation { waiters.append($0) }
    }

    /// Marks the operation as not to be run.
    ///
    /// It is safe from any thread (a task-cancellation handler).
    nonisolated func requestCancellation() {
        cancellationRequested.withLock { $0 = true }
    }

    /// Whether ``requestCancellation()`` was called.
    var isCancellationRequested: Bool { cancellationRequested.withLock { $0 } }

    /// Records the outcome.
    ///
    /// Each ticket ends exactly once.
    func finish(_ outcome: OperationOutcome) {
        precondition(self.outcome == nil, "operation \(id) (\(name)) finished twice")
        self.outcome = outcome
        let waiting = waiters
        waiters.removeAll()
        for waiter in waiting { waiter.resume(returning: outcome) }
    }
}
