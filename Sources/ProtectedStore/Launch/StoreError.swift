public import Foundation
public import SecureKeys

/// An error of the store layer, with the project's kebab-case codes; it wraps the lower layers' errors so an
/// app sees one type.
public struct StoreError: CodedError, LocalizedError, Hashable {
    /// The kebab-case code (`store-damaged`, `queue-full`, …); lower layers' codes pass through unchanged.
    public let codeName: String
    /// A sentence for a person, without any secret.
    public let message: String

    public init(codeName: String, message: String) {
        self.codeName = codeName
        self.message = message
    }

    /// Wraps any error: coded errors keep their code, others become `store-error`.
    public init(_ error: any Error) {
        if let error = error as? StoreError {
            self = error
        } else if let coded = error as? any CodedError {
            self.init(codeName: coded.codeName, message: coded.description)
        } else {
            self.init(codeName: "store-error", message: String(describing: error))
        }
    }

    public var description: String { message.hasPrefix(codeName + ":") ? message : "\(codeName): \(message)" }
    public var errorDescription: String? { description }

    /// The operation queue is at its capacity; the operation was not queued.
    public static func queueFull(capacity: Int) -> Self {
        Self(codeName: "queue-full", message: "the operation queue is full (\(capacity) operations waiting for protected data)")
    }

    /// The operation was cancelled before it ran.
    public static let cancelled = Self(codeName: "cancelled", message: "the operation was cancelled before it ran")

    /// The operation's deadline passed before it could run.
    public static let deadlineExceeded = Self(
        codeName: "deadline-exceeded", message: "the operation's deadline passed while it waited for protected data")

    /// The app terminated before the operation ran.
    public static let terminated = Self(codeName: "terminated", message: "the app terminated before the operation ran")

    /// The store was closed (protected data became unavailable) while the operation ran.
    public static let storeClosed = Self(
        codeName: "protected-data-unavailable", message: "the store was closed because protected data became unavailable")
}
