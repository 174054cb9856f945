public import SecureKeys

/// What the device tells apps about their protected data, modelled on UIKit's
/// `protectedDataWillBecomeUnavailable` / `protectedDataDidBecomeAvailable` notifications.
public enum ProtectedDataEvent: Sendable, Hashable, CustomStringConvertible {
    /// The device was locked.
    ///
    /// Class A and B keys will be wiped when the grace period ends. The event is delivered at the lock, so the
    /// app can finish its writes and close class-A stores in time.
    case willBecomeUnavailable
    /// The grace period ended.
    ///
    /// Class A keys and the class B private key are wiped now.
    case didBecomeUnavailable
    /// The device was unlocked, and every class is available.
    case didBecomeAvailable

    /// The event in words, as UIKit's notification names say it.
    public var description: String {
        switch self {
        case .willBecomeUnavailable: "protected data will become unavailable"
        case .didBecomeUnavailable: "protected data did become unavailable"
        case .didBecomeAvailable: "protected data did become available"
        }
    }
}

/// Which protection classes can be read at one moment.
public struct ProtectedDataAvailability: Sendable, Hashable, CustomStringConvertible {
    /// The classes whose keys are held now.
    public let availableClasses: Set<ProtectionClass>

    /// The availability of exactly `availableClasses`.
    public init(availableClasses: Set<ProtectionClass>) { self.availableClasses = availableClasses }

    /// Whether `protectionClass` can be read now.
    public func isAvailable(_ protectionClass: ProtectionClass) -> Bool { availableClasses.contains(protectionClass) }

    /// The available classes by name, comma-separated.
    public var description: String {
        ProtectionClass.allCases.filter(availableClasses.contains).map(\.name).joined(separator: ", ")
    }
}
