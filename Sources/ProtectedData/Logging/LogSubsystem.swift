package import Logging

/// The parts of ProtectedStore that log, each with its own swift-log label, so an app can route or filter
/// them (`protected-store.launch`, `protected-store.device`, …).
///
/// The library never bootstraps the logging system and logs only at `trace` and `debug`: what goes wrong is
/// thrown or reported as an event to the app, which decides what to say (the Swift Server Workgroup's
/// logging guidance for libraries). With swift-log's default handler (`info`) it prints nothing; an app that
/// bootstraps a handler at `debug` or `trace` sees the flow.
///
/// Never logged: key bytes, passcodes, stored keys or values, inbox payloads. Metadata carries what is safe
/// to read in a bug report: paths, protection classes, phases, operation names and ids, error codes, counts.
package enum LogSubsystem: String, CaseIterable, Sendable {
    /// The two-phase launch.
    ///
    /// It logs phases, attach attempts, and the queue of operations.
    case launch
    /// The device.
    ///
    /// It logs lock, unlock, grace period, and store keys (never their bytes, never the passcode).
    case device
    /// The store.
    ///
    /// It logs open, close, and readers.
    case store
    /// The schema migrations run at attach.
    case migrations
    /// The locked inbox.
    ///
    /// It logs appends, merges, and quarantine.
    case inbox
    /// The desktop session's lock, as logind and the screen saver report it.
    case session

    /// The swift-log label, `protected-store.` and the subsystem's name.
    package var label: String { "protected-store.\(rawValue)" }

    /// A logger from the logging system the app bootstrapped (swift-log's default if it did not).
    package func makeLogger() -> Logger { Logger(label: label) }
}
