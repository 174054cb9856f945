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
    /// `available`, `locked (CLASS)` or `absent`; never the key.
    public var description: String {
        switch self {
        case .available: "available"
        case .locked(let protectionClass): "locked (\(protectionClass.name))"
        case .absent: "absent"
        }
    }
}

/// Where a store coordinator gets its store key: the simulated device, or a real keychain-backed source.
public protocol StoreKeyProvider: Sendable {
    /// The store's key, looked up three ways.
    func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup
    /// Creates the key of a new store; only after a look-up said ``StoreKeyLookup/absent``.
    ///
    /// - Throws: when the class key is not held now (the device locked between the look-up and this call),
    ///   an error whose code is `protected-data-unavailable` — ``DeviceError/protectedDataUnavailable(_:)``, or
    ///   `StoreError.protectedDataUnavailable(_:)` from a source written against `ProtectedStore` — and the
    ///   controller waits for *did become available*; any other error fails the attach and is presented.
    func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes
}
