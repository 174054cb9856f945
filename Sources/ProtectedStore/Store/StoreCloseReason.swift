/// Why a store was closed, which decides what a later call on its coordinator throws.
package enum StoreCloseReason: Sendable {
    /// Protected data became unavailable.
    ///
    /// This closes a class-A store at the lock, or a store whose keys were erased. Calls throw
    /// `StoreError.Code.protectedDataUnavailable`, and the store opens again, with a new coordinator, when
    /// protected data becomes available.
    case protectedDataUnavailable
    /// The app closed it (``DataController/terminate()``, or a tool's own close).
    ///
    /// Calls throw `StoreError.Code.closed`, and nothing reopens this coordinator.
    case closedByApp

    /// What a call on the closed store throws.
    var error: StoreError {
        switch self {
        case .protectedDataUnavailable: .storeClosedAtLock()
        case .closedByApp: .storeClosed()
        }
    }
}
