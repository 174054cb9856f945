/// The on-disk format of a store file.
///
/// It is every SQLCipher setting that must match for the file to open.
///
/// SQLCipher keeps none of its settings in the file (the first 16 bytes are the salt, the rest is ciphertext),
/// and its defaults change between major versions: a store written with SQLCipher 3's defaults reads as
/// `file is not a database` under SQLCipher 4's. So each store's format is recorded in its key file
/// (``StoreKeyFile``, version 2; a version-1 key file means format 1), and the connection sets every one of
/// these settings explicitly at open, whatever the linked library's defaults are. <doc:KeyFileFormats> documents
/// each format's settings, and what to type into SQLCipher 4 to open one.
public struct StoreFormat: Sendable, Hashable, CustomStringConvertible {
    /// The number recorded in a key file.
    ///
    /// It is `0` for a format no key file can record (a page size outside the store formats, which only
    /// benchmarks ask for).
    public let identifier: UInt8
    /// The SQLCipher major version whose defaults the format is (`PRAGMA cipher_compatibility` on SQLCipher 4).
    public let compatibility: Int
    /// The size of a page, encrypted and authenticated as one unit.
    ///
    /// This is `cipher_page_size`.
    public let pageSize: Int
    /// The per-page MAC.
    ///
    /// It is `HMAC_SHA1` (SQLCipher 3), spelled as SQLCipher 4's `cipher_hmac_algorithm` takes it.
    public let hmacAlgorithm: String
    /// The key derivation.
    ///
    /// It is `PBKDF2_HMAC_SHA1`, spelled as SQLCipher 4's `cipher_kdf_algorithm` takes it. With a raw key it
    /// derives only the HMAC key (from the store key, `fastKDFIterations` rounds).
    public let kdfAlgorithm: String
    /// PBKDF2 rounds from a passphrase (`kdf_iter`).
    ///
    /// Unused for a store (keyed raw), pinned all the same.
    public let kdfIterations: Int
    /// PBKDF2 rounds from the encryption key to the HMAC key (`fast_kdf_iter`).
    public let fastKDFIterations: Int

    /// Format 1, `sqlcipher3-raw-4096`.
    ///
    /// It has SQLCipher 3's settings (AES-256-CBC, HMAC-SHA1 per page, PBKDF2-HMAC-SHA1) with 4096-byte pages,
    /// keyed with the raw 32-byte store key. Every store made before formats were recorded is in this one.
    public static let sqlcipher3Raw4096 = StoreFormat(
        identifier: 1, compatibility: 3, pageSize: 4096, hmacAlgorithm: "HMAC_SHA1", kdfAlgorithm: "PBKDF2_HMAC_SHA1",
        kdfIterations: 64000, fastKDFIterations: 2)

    /// Format 2, `sqlcipher4-raw-4096`.
    ///
    /// It has SQLCipher 4's settings (AES-256-CBC, HMAC-SHA512 per page, PBKDF2-HMAC-SHA512, 256,000 rounds
    /// from a passphrase) with 4096-byte pages, keyed with the raw 32-byte store key. It is what `migrate`
    /// rewrites a store into. Only a SQLCipher 4 or later can open or write it (`CipherSettings` refuses it on
    /// SQLCipher 3, naming both).
    public static let sqlcipher4Raw4096 = StoreFormat(
        identifier: 2, compatibility: 4, pageSize: 4096, hmacAlgorithm: "HMAC_SHA512",
        kdfAlgorithm: "PBKDF2_HMAC_SHA512", kdfIterations: 256000, fastKDFIterations: 2)

    /// The format new stores are created in.
    public static let current = sqlcipher3Raw4096

    /// The format `migrate` moves a store to.
    ///
    /// It is ``sqlcipher4Raw4096``.
    public static let migrationTarget = sqlcipher4Raw4096

    /// Every format a key file can record, by ``identifier``.
    public static let recorded: [StoreFormat] = [.sqlcipher3Raw4096, .sqlcipher4Raw4096]

    /// The recorded format `identifier` names, or `nil` for one this build does not know.
    public init?(recordedIdentifier identifier: UInt8) {
        guard let format = Self.recorded.first(where: { $0.identifier == identifier }) else { return nil }
        self = format
    }

    /// SQLCipher 3's settings with a page size of `pageSize`.
    ///
    /// This is format 1 when it is 4096, otherwise a format no key file records (a database of the
    /// benchmarks').
    public init(sqlcipher3PageSize pageSize: Int) {
        let format1 = Self.sqlcipher3Raw4096
        self.init(
            identifier: pageSize == format1.pageSize ? format1.identifier : 0, compatibility: 3, pageSize: pageSize,
            hmacAlgorithm: format1.hmacAlgorithm, kdfAlgorithm: format1.kdfAlgorithm,
            kdfIterations: format1.kdfIterations, fastKDFIterations: format1.fastKDFIterations)
    }

    private init(
        identifier: UInt8, compatibility: Int, pageSize: Int, hmacAlgorithm: String, kdfAlgorithm: String,
        kdfIterations: Int, fastKDFIterations: Int
    ) {
        self.identifier = identifier
        self.compatibility = compatibility
        self.pageSize = pageSize
        self.hmacAlgorithm = hmacAlgorithm
        self.kdfAlgorithm = kdfAlgorithm
        self.kdfIterations = kdfIterations
        self.fastKDFIterations = fastKDFIterations
    }

    /// The format's short name, such as `sqlcipher3-raw-4096`.
    public var name: String { "sqlcipher\(compatibility)-raw-\(pageSize)" }

    /// What an error says about the store's format.
    ///
    /// For example, `format 1 (SQLCipher 3, 4096-byte pages, HMAC-SHA1)`.
    public var description: String {
        let settings = "SQLCipher \(compatibility), \(pageSize)-byte pages, \(hmacAlgorithm.replacingUnderscores)"
        return identifier == 0 ? "unrecorded format \(name) (\(settings))" : "format \(identifier) (\(settings))"
    }
}

extension String {
    /// `HMAC_SHA1` as people write it, `HMAC-SHA1`.
    fileprivate var replacingUnderscores: String { String(map { $0 == "_" ? "-" : $0 }) }
}
