/// When a piece of data can be read, modelled on Apple's Data Protection classes.
///
/// The raw value is the class identifier stored in key files (<doc:KeyFileFormats>); it never changes.
public enum ProtectionClass: UInt8, Sendable, Hashable, CaseIterable, Codable {
    /// Class A, `NSFileProtectionComplete`, readable only while the device is unlocked.
    ///
    /// Its key is unwrapped at unlock and wiped when the grace period after a lock ends.
    case complete = 1
    /// Class B, `NSFileProtectionCompleteUnlessOpen`, an X25519 key pair.
    ///
    /// The public half is always available, so new data can be sealed while locked. The private half behaves like
    /// class A, and a file opened while unlocked stays usable after the lock.
    case completeUnlessOpen = 2
    /// Class C, `NSFileProtectionCompleteUntilFirstUserAuthentication`.
    ///
    /// It is available from the first unlock after boot until the next reboot.
    case completeUntilFirstUserAuthentication = 3
    /// Class D, `NSFileProtectionNone`, always available.
    ///
    /// It is wrapped by the device key alone.
    case none = 4

    /// The short word used in scripts and on screen.
    public var name: String {
        switch self {
        case .complete: "complete"
        case .completeUnlessOpen: "complete-unless-open"
        case .completeUntilFirstUserAuthentication: "until-first-unlock"
        case .none: "none"
        }
    }

    /// The class named `name` (``name``), or `nil`.
    public init?(name: String) {
        guard let match = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = match
    }

    /// Whether the class key is wrapped by the passcode (all but ``none``).
    public var requiresPasscode: Bool { self != .none }
}
