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
    /// The store's key file as it must read once the store is rewritten in `format`: the same store key and
    /// store identifier, wrapped again by the class key with `format` recorded. Nothing is written: the
    /// store's rewrite (`migrate`) puts it in place at its commit point.
    ///
    /// A default implementation refuses (`SecureKeysError.Code.unsupportedFormat`): a source that cannot
    /// wrap store keys again cannot migrate its stores.
    ///
    /// - Throws: when the class key is not held now, `protected-data-unavailable`; the key file's errors.
    func storeKeyFile(forStoreAt storePath: String, recording format: StoreFormat) throws -> StoreKeyFile
}

extension StoreKeyProvider {
    /// Refuses: this source cannot wrap a store key again, so its stores cannot be rewritten in another format.
    ///
    /// - Throws: `SecureKeysError.Code.unsupportedFormat` naming the source's type.
    public func storeKeyFile(forStoreAt storePath: String, recording format: StoreFormat) throws -> StoreKeyFile {
        throw SecureKeysError.unsupportedFormat(
            "\(type(of: self)) cannot wrap the store key again to record \(format); rewrite the store with a key source that holds its class key",
            path: StoreFiles(database: storePath).key)
    }
}
