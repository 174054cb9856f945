public import SecureKeys

/// How a copy of a database (``Database/export(to:encryption:)``) is written.
///
/// It is written in the clear, or encrypted under a key its user holds. It is never written under the store key,
/// which only the device's class key unwraps.
///
/// <doc:/SecureKeys/KeyFileFormats> (*Exports*) documents each form, so that another program can open an export without this
/// library.
public enum ExportEncryption: Sendable {
    /// A plain SQLite file, which `sqlite3` (or any SQLite) opens.
    ///
    /// **Everything in the database is then readable by whoever reads the file.** It is only for a user who asked
    /// for it by name (the command line's `--plaintext`, which also warns).
    case plaintext
    /// SQLCipher, in `StoreFormat/current` (format 1), keyed with this 32-byte raw key.
    ///
    /// The key is one the user holds (a key file of theirs). It is not copied: the caller still owns (and wipes)
    /// it.
    case key(SecureBytes)
    /// SQLCipher, in `StoreFormat/current`, keyed with the raw key Argon2id derives from this passphrase and a
    /// random salt that the file's first 16 bytes hold (``ExportPassphrase``). Not copied.
    case passphrase(SecureBytes)

    /// `plaintext`, `key` or `passphrase`, never the secret.
    public var name: String {
        switch self {
        case .plaintext: "plaintext"
        case .key: "key"
        case .passphrase: "passphrase"
        }
    }
}

/// The key of a passphrase export.
///
/// It is Argon2id (`crypto_pwhash`, `crypto_pwhash_ALG_ARGON2ID13`, 32-byte output) of the passphrase, with the
/// salt SQLCipher keeps in the file's first 16 bytes and the fixed cost ``kdf``. The file records its own salt,
/// and the cost is this format's, so the passphrase alone opens it. Read bytes 0..<16, derive, then key SQLCipher
/// with the raw key (<doc:/SecureKeys/KeyFileFormats>, *Exports*).
public enum ExportPassphrase: Sendable {
    /// The Argon2id cost of every passphrase export.
    ///
    /// It is 3 passes over 64 MiB (`opslimit = 3`, `memlimit = 67108864`). It is fixed by the format, so changing
    /// it makes a new export format.
    public static let kdf = PasscodeKDF(opsLimit: 3, memLimit: 64 << 20)

    /// The raw SQLCipher key of the passphrase export at `path`.
    ///
    /// It is Argon2id of `passphrase` with the salt in the file's first 16 bytes.
    ///
    /// - Parameters:
    ///   - path: the export.
    ///   - passphrase: the passphrase it was made with.
    /// - Returns: the 32-byte key, in guarded memory; open the file with
    ///   ``Database/init(openingUntrustedFileAt:key:configuration:)``.
    /// - Throws: `StoreError.Code.storeUnavailable` when the file cannot be read or is shorter than a salt;
    ///   a failure of Argon2id (`out-of-memory`).
    public static func key(forExportAt path: String, passphrase: SecureBytes) throws -> SecureBytes {
        let salt = try readSalt(of: path)
        return try kdf.deriveKey(from: passphrase, salt: salt)
    }

    /// The 16-byte salt at the start of a SQLCipher file.
    static func readSalt(of path: String) throws -> [UInt8] {
        guard let handle = fopen(path, "rb") else {
            throw StoreError(code: .storeUnavailable, message: "cannot open the export to read its salt", path: path)
        }
        defer { fclose(handle) }
        var salt = [UInt8](repeating: 0, count: PasscodeKDF.saltLength)
        guard fread(&salt, 1, salt.count, handle) == salt.count else {
            throw StoreError(
                code: .storeUnavailable, message: "the export is shorter than its 16-byte salt: not a SQLCipher file", path: path)
        }
        return salt
    }
}

import Glibc
