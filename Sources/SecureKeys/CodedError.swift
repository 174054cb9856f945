/// An error that carries one of the project's short kebab-case codes (`wrong-passcode`, `store-damaged`, …),
/// so every layer's errors read the same way in scripts, on screen and in the README's list.
public protocol CodedError: Error, Sendable, CustomStringConvertible {
    /// The short kebab-case word users see.
    var codeName: String { get }
}

extension SecureKeysError: CodedError {
    public var codeName: String { code.name }
}
