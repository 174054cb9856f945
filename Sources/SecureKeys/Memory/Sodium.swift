internal import CSodium

/// libsodium must be initialised once before any other call.
///
/// `sodium_init` is idempotent and thread-safe ("sodium_init() ... can safely be called multiple times",
/// libsodium docs, "Usage").
enum Sodium {
    /// Evaluated once, lazily and thread-safely, by Swift's global initialisation rules.
    private static let initialised: Bool = sodium_init() >= 0

    /// Call at the top of every entry point that reaches libsodium.
    static func ensureInitialised() {
        precondition(initialised, "libsodium failed to initialise (sodium_init returned -1)")
    }
}
