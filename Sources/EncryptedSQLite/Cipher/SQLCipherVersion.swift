/// A version of SQLCipher, as `PRAGMA cipher_version` reports it (`3.4.1`, `4.12.0 community`).
///
/// Which pragmas pin a store's format depends on it: SQLCipher 3 has `cipher_use_hmac`, `fast_kdf_iter`,
/// `cipher_hmac_pgno` and `cipher_hmac_salt_mask`, SQLCipher 4 replaced them with `cipher_hmac_algorithm`,
/// `cipher_kdf_algorithm` and `cipher_plaintext_header_size` (an unknown pragma is silently ignored, so the
/// right set must be chosen, never both sent and hoped for).
public struct SQLCipherVersion: Sendable, Hashable, CustomStringConvertible {
    /// What the library reported, whole.
    public let reported: String
    /// The major version.
    ///
    /// It is 3 or 4 for the libraries the store runs on.
    public let major: Int
    /// The minor version.
    public let minor: Int
    /// The patch version (0 when not reported).
    public let patch: Int

    /// Parses `PRAGMA cipher_version`'s answer.
    ///
    /// The answer is `MAJOR.MINOR[.PATCH]` and, after a space, an edition.
    ///
    /// - Returns: `nil` when it does not start with a version number.
    public init?(reported: String) {
        self.reported = reported
        let number = reported.split(separator: " ").first.map(String.init) ?? ""
        let parts = number.split(separator: ".", omittingEmptySubsequences: false).map { Int($0) }
        guard parts.count >= 2, parts.count <= 3, let major = parts[0], let minor = parts[1] else { return nil }
        self.major = major
        self.minor = minor
        guard let patch = parts.count == 3 ? parts[2] : 0 else { return nil }
        self.patch = patch
    }

    /// `SQLCipher 3.4.1`.
    public var description: String { "SQLCipher \(reported)" }
}
