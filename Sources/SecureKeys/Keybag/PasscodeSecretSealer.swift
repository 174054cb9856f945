/// What keeps the passcode secret `S` of a version-2 keybag.
///
/// The secret is one that something outside the disk, a TPM 2.0, releases only for an authorization value derived
/// from the passcode, and it counts every refusal.
///
/// The keybag stores what ``sealPasscodeSecret(_:authValue:)`` returns as an opaque record and gives it back to
/// ``unsealPasscodeSecret(_:authValue:)`` at every unlock. `S` is mixed into the key that wraps the passcode
/// classes (<doc:KeyFileFormats>, "Keybag, version 2"), so the device key and the keybag alone no longer allow a
/// passcode to be tested: each guess must go through the sealer.
public protocol PasscodeSecretSealer: Sendable {
    /// Seals `secret` so that only `authValue` releases it.
    ///
    /// - Parameters:
    ///   - secret: the 32-byte passcode secret `S`.
    ///   - authValue: the authorization value derived from the passcode key (32 bytes).
    /// - Returns: the sealed record the keybag keeps (at most ``Keybag/maximumSealedSecretLength`` bytes); not
    ///   secret without the sealer.
    /// - Throws: the sealer's errors (a TPM that cannot be reached or refuses).
    func sealPasscodeSecret(_ secret: SecureBytes, authValue: SecureBytes) throws -> [UInt8]

    /// Releases the secret in `sealed` for `authValue`.
    ///
    /// - Parameters:
    ///   - sealed: the record ``sealPasscodeSecret(_:authValue:)`` returned.
    ///   - authValue: the authorization value derived from the passcode being tried.
    /// - Returns: `S`, which the caller wipes.
    /// - Throws: `SecureKeysError.Code.wrongPasscode` when the sealer refuses `authValue` (counted by it); the
    ///   sealer's own errors (a lockout, a TPM that cannot be reached, a record it refuses).
    func unsealPasscodeSecret(_ sealed: [UInt8], authValue: SecureBytes) throws -> SecureBytes
}
