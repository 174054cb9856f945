public import SecureKeys
internal import StoreErrors

/// The statements that set every setting of a store format on the linked SQLCipher, run right after the key
/// and before the first read (SQLCipher's settings apply to a connection from its key to its first page).
///
/// Every setting is set, none left to the library's defaults: SQLCipher's defaults differ between major
/// versions (SQLCipher 4 reads a SQLCipher 3 file as `file is not a database`), and a program can change them
/// process-wide (`PRAGMA cipher_default_use_hmac = OFF`, `cipher_default_page_size`). <doc:/SecureKeys/KeyFileFormats> lists the
/// same settings for each format, for a program that opens a store on its own.
public struct CipherSettings: Sendable, Hashable, CustomStringConvertible {
    /// The store's format.
    public let format: StoreFormat
    /// The library the settings are for.
    public let library: SQLCipherVersion

    /// The settings of `format` on `library`.
    ///
    /// - Throws: `StoreError.Code.storeUnavailable` naming the format and the library, when the library
    ///   cannot read the format: SQLCipher before 3, or a SQLCipher 3 asked for a format of SQLCipher 4.
    public init(format: StoreFormat, library: SQLCipherVersion) throws {
        guard library.major >= 3, format.compatibility <= library.major else {
            throw StoreError(
                code: .storeUnavailable,
                message: "the store is \(format), which \(library) cannot open (it needs SQLCipher \(max(3, format.compatibility)) or later)")
        }
        self.format = format
        self.library = library
    }

    /// The `PRAGMA` statements, in order.
    ///
    /// On SQLCipher 3: `cipher_page_size`, `cipher_use_hmac`, `kdf_iter`, `fast_kdf_iter` (the HMAC key's
    /// PBKDF2 rounds), `cipher_hmac_pgno` and `cipher_hmac_salt_mask` (how the page number and the HMAC key's
    /// salt enter the MAC; SQLCipher 3 has no `cipher_hmac_algorithm`: its HMAC is SHA-1). On SQLCipher 4 and
    /// later: `cipher_page_size`, `cipher_use_hmac`, `cipher_hmac_algorithm`, `cipher_kdf_algorithm`,
    /// `kdf_iter` and `cipher_plaintext_header_size` — SQLCipher 4.1 deprecated `fast_kdf_iter`,
    /// `cipher_hmac_pgno` and `cipher_hmac_salt_mask`, whose values it keeps at SQLCipher 3's (2, little-endian,
    /// `0x3a`). The SQLCipher 4 list is the one <doc:/SecureKeys/KeyFileFormats> documents, and the one the SQLCipher 4 oracle
    /// test opens stores with.
    public var pragmas: [String] {
        var statements = [
            "PRAGMA cipher_page_size = \(format.pageSize)",
            "PRAGMA cipher_use_hmac = ON",
        ]
        if library.major == 3 {
            statements += [
                "PRAGMA kdf_iter = \(format.kdfIterations)",
                "PRAGMA fast_kdf_iter = \(format.fastKDFIterations)",
                "PRAGMA cipher_hmac_pgno = le",
                "PRAGMA cipher_hmac_salt_mask = \"x'3a'\"",
            ]
        } else {
            statements += [
                "PRAGMA cipher_hmac_algorithm = \(format.hmacAlgorithm)",
                "PRAGMA cipher_kdf_algorithm = \(format.kdfAlgorithm)",
                "PRAGMA kdf_iter = \(format.kdfIterations)",
                "PRAGMA cipher_plaintext_header_size = 0",
            ]
        }
        return statements
    }

    /// What an error says about a store it could not open.
    ///
    /// For example, `format 1 (SQLCipher 3, 4096-byte pages, HMAC-SHA1) with SQLCipher 3.4.1`.
    public var description: String { "\(format) with \(library)" }
}
