extension DataController {
    /// Where the store stack is.
    public enum Phase: Sendable, Equatable, CustomStringConvertible {
        /// The app has not launched yet.
        case notLaunched
        /// The store is being attached.
        case launching
        /// The store's key is not available.
        ///
        /// Operations queue until the device unlocks.
        case waitingForProtectedData
        /// The store is attached.
        ///
        /// ``DataController/coordinator`` is set and operations run.
        case ready
        /// Attaching failed while protected data was available.
        ///
        /// The error was presented.
        case failed(StoreError)
        /// The app terminated.
        case terminated

        /// The word used in scripts and by the command-line tool.
        ///
        /// It is `not-launched`, `launching`, `waiting`, `ready`, `failed` or `terminated`.
        public var name: String {
            switch self {
            case .notLaunched: "not-launched"
            case .launching: "launching"
            case .waitingForProtectedData: "waiting"
            case .ready: "ready"
            case .failed: "failed"
            case .terminated: "terminated"
            }
        }

        /// The ``name``, with the error's code for a failure.
        public var description: String {
            if case .failed(let error) = self { "failed (\(error.code))" } else { name }
        }

        /// Two phases are equal when they are the same case.
        ///
        /// Two failures are equal when their errors have the same code.
        public static func == (lhs: Phase, rhs: Phase) -> Bool {
            switch (lhs, rhs) {
            case (.failed(let left), .failed(let right)): left.code == right.code
            default: lhs.name == rhs.name
            }
        }
    }

    /// Something the controller did, for observers (``observe(_:)``, ``events()``).
    public enum Event: Sendable {
        /// The phase changed.
        case phaseChanged(Phase)
        /// A merge of the locked inbox applied or found records.
        case inboxMerged(InboxMergeReport)
        /// An error was presented to the user (protected data was available and the store still failed).
        case errorPresented(StoreError)
        /// A queued operation ended.
        ///
        /// It ran, failed, was cancelled or expired.
        case operationFinished(OperationTicket)
    }
}
