/// The class keys a keybag unwrapped, held in guarded memory until wiped.
///
/// For ``ProtectionClass/completeUnlessOpen`` the key is the X25519 private key; its public half is in the
/// keybag, always available.
public struct ClassKeys: Sendable {
    private var keys: [ProtectionClass: SecureBytes]

    init(_ keys: [ProtectionClass: SecureBytes]) { self.keys = keys }

    /// The key of `protectionClass`, or `nil` when it is not held.
    public subscript(_ protectionClass: ProtectionClass) -> SecureBytes? { keys[protectionClass] }

    /// The classes whose keys are held.
    public var classes: Set<ProtectionClass> { Set(keys.keys) }

    /// Zeroes every key and releases the memory.
    public func wipeAll() {
        for key in keys.values { key.wipe() }
    }
}
