public import SecureKeys

/// The answer to "can I have this store's key now?": three ways, because only one of them may ever lead to
/// creating a key.
public enum StoreKeyLookup: Sendable {
    /// The key file exists and its class key is held: here is the store key.
    case available(SecureBytes)
    /// The key file exists but its class key is not held now (locked, or before the first unlock). Wait for
    /// the device's *did become available* event; never create a key in this state.
    case locked(ProtectionClass)
    /// There is no key file: the store was never created. Only this case may create a key, and only when no
    /// store file exists either.
    case absent
}

extension StoreKeyLookup: CustomStringConvertible {
    public var description: String {
        switch self {
        case .available: "available"
        case .locked(let protectionClass): "locked (\(protectionClass.name))"
        case .absent: "absent"
        }
    }
}
