public import ProtectedStore
import ProtectedData

/// One line of the command language that `protected-store shell` and scenario scripts share.
public enum ScenarioCommand: Sendable, Hashable {
    /// `passcode` is `nil` in the shell when it is to be read from the terminal with echo off.
    case deviceSetup(passcode: String?, grace: Duration, wipeAfter: Int?)
    case deviceReboot
    case deviceLock
    /// `passcode` is `nil` in the shell when it is to be read from the terminal with echo off.
    case deviceUnlock(passcode: String?)
    case deviceChangePasscode(old: String, new: String)
    case clockAdvance(Duration)
    case appLaunch(LaunchOptions, protection: ProtectionClass?, attachDelay: Duration)
    case appTerminate
    case appCrash
    case ui(String)
    case put(key: String, value: String)
    case get(key: String)
    case delete(key: String)
    case inboxPut(key: String, value: String)
    case status
    case expect(Expectation)

    /// Whether the line hides a secret and must not be echoed or logged as typed.
    public var containsPasscode: Bool {
        switch self {
        case .deviceSetup, .deviceUnlock, .deviceChangePasscode: true
        default: false
        }
    }
}

/// What an `expect` line checks.
public enum Expectation: Sendable, Hashable {
    case protectedData(available: Bool)
    case store(String)
    case coordinator(assigned: Bool)
    case interaction(enabled: Bool)
    case queued(Int)
    case ran([String])
    case value(key: String, value: String)
    case missing(key: String)
    case error(String)
    case presentedError(String)
    case device(String)
    case inbox(Int)
    case noPlaintext
    /// `PRAGMA integrity_check` of the attached store answers `ok` (every page read, so every HMAC checked).
    case integrityOK
}
