public import Foundation
import SecureKeys

/// An error from the encrypted store: what kind, in words a person can act on, and where.
///
/// Raw SQLite result codes stay inside this module (GRDB: "library user is not supposed to be exposed to raw
/// result codes"); callers switch on ``Code``. Messages never contain key material: the key is never part of
/// an SQL statement this module runs.
public struct SQLiteError: Error, Sendable {
    /// What kind of failure this is. Extensible: compare with the static members, show ``Code/name``.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case wrongKey = "wrong-key"
            case unavailable = "store-unavailable"
            case corrupt = "store-damaged"
            case constraint = "constraint"
            case diskFull = "disk-full"
            case readOnly = "read-only"
            case busy = "busy"
            case notSQLCipher = "not-sqlcipher"
            case misuse = "misuse"
            case closed = "closed"
            case other = "sqlite-error"
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The short kebab-case word users see.
        public var name: String { base.rawValue }
        /// The ``name``.
        public var description: String { name }

        /// The key does not decrypt the file, or the file is not a database (`SQLITE_NOTADB`). SQLCipher
        /// cannot tell these apart: both fail the first page's HMAC.
        public static let wrongKey = Code(.wrongKey)
        /// The file cannot be opened or read or written (`SQLITE_CANTOPEN`, `SQLITE_IOERR`, `SQLITE_PERM`,
        /// `SQLITE_AUTH`). On a locked device this is how unavailable protected data shows.
        public static let unavailable = Code(.unavailable)
        /// A page failed its HMAC or the b-tree is inconsistent (`SQLITE_CORRUPT`).
        public static let corrupt = Code(.corrupt)
        /// A constraint was violated (`SQLITE_CONSTRAINT`).
        public static let constraint = Code(.constraint)
        /// The disk or the file size limit is full (`SQLITE_FULL`).
        public static let diskFull = Code(.diskFull)
        /// The file or its directory cannot be written (`SQLITE_READONLY`).
        public static let readOnly = Code(.readOnly)
        /// Another connection holds a lock (`SQLITE_BUSY`, `SQLITE_LOCKED`).
        public static let busy = Code(.busy)
        /// The linked library is not SQLCipher: `PRAGMA cipher_version` returned nothing.
        public static let notSQLCipher = Code(.notSQLCipher)
        /// The API was used wrongly (`SQLITE_MISUSE`, `SQLITE_RANGE`): a bug in the caller.
        public static let misuse = Code(.misuse)
        /// The database was closed.
        public static let closed = Code(.closed)
        /// Any other SQLite failure.
        public static let other = Code(.other)

        /// Maps a SQLite result code; internal so raw codes never reach callers.
        init(resultCode: Int32) {
            switch resultCode & 0xff {
            case 26: self = .wrongKey  // SQLITE_NOTADB
            case 10, 14, 3, 23: self = .unavailable  // SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_AUTH
            case 11: self = .corrupt  // SQLITE_CORRUPT
            case 19: self = .constraint  // SQLITE_CONSTRAINT
            case 13: self = .diskFull  // SQLITE_FULL
            case 8: self = .readOnly  // SQLITE_READONLY
            case 5, 6: self = .busy  // SQLITE_BUSY, SQLITE_LOCKED
            case 21, 25: self = .misuse  // SQLITE_MISUSE, SQLITE_RANGE
            default: self = .other
            }
        }
    }

    /// What kind of failure.
    public var code: Code
    /// SQLite's message, or ours.
    public var message: String
    /// The statement that failed, when there is one (its text only; bound values are never included).
    public var sql: String?
    /// The database file.
    public var path: String?
    /// SQLite's extended result code (extended codes are on for every connection): `SQLITE_CONSTRAINT_FOREIGNKEY`
    /// (787) and `SQLITE_CONSTRAINT_UNIQUE` (2067) are both ``Code/constraint``, `SQLITE_IOERR_FSYNC` (1034)
    /// and `SQLITE_IOERR_WRITE` (778) both I/O errors. Zero for errors this module raises itself.
    public let extendedResultCode: Int32

    init(code: Code, message: String, sql: String? = nil, path: String? = nil, extendedResultCode: Int32 = 0) {
        self.code = code
        self.message = message
        self.sql = sql
        self.path = path
        self.extendedResultCode = extendedResultCode
    }

    init(resultCode: Int32, message: String, sql: String? = nil, path: String? = nil, systemErrno: Int32 = 0) {
        if resultCode & 0xff == Self.sqliteIOError && Self.noSpaceErrnos.contains(systemErrno) {
            // SQLite reports SQLITE_FULL only for ENOSPC met as a short write; a write refused outright
            // (ENOSPC, EFBIG past RLIMIT_FSIZE, EDQUOT) comes back as SQLITE_IOERR_WRITE. Either way the
            // disk is full for this store, and that is what the user needs to read.
            self.init(
                code: .diskFull, message: "no space to write the store (\(message), \(String(cString: strerror(systemErrno))))",
                sql: sql, path: path, extendedResultCode: resultCode)
            return
        }
        if resultCode == Self.sqliteError && message == Self.bareErrorMessage {
            // SQLCipher 3.4.1 reports a page that fails its HMAC as a bare SQLITE_ERROR carrying SQLite's
            // default text (the codec sets the pager's error without a message); an SQL error always has its own
            // message ("no such table: …", "near …: syntax error"). So this exact pair means a damaged page.
            self.init(
                code: .corrupt, message: "a page failed authentication (HMAC): the store file is damaged", sql: sql,
                path: path, extendedResultCode: resultCode)
            return
        }
        self.init(code: Code(resultCode: resultCode), message: message, sql: sql, path: path, extendedResultCode: resultCode)
    }

    static let sqliteError: Int32 = 1
    static let sqliteIOError: Int32 = 10
    /// The errors of a write that found no room: no space on the device, past the file-size limit, over quota.
    static let noSpaceErrnos: Set<Int32> = [ENOSPC, EFBIG, EDQUOT]
    /// `sqlite3_errstr(SQLITE_ERROR)` in SQLite 3.15.2, which SQLCipher 3.4.1 is built on.
    static let bareErrorMessage = "SQL logic error or missing database"
}

extension SQLiteError: CustomStringConvertible, LocalizedError {
    /// The message with the file and the statement, without the code word.
    public var detail: String {
        var text = message
        if let path { text += " (\(path))" }
        if let sql { text += " in `\(sql)`" }
        return text
    }

    /// `code: message (path) in `sql``.
    public var description: String { "\(code.name): \(detail)" }

    /// swift-argument-parser prints this for errors a command throws.
    public var errorDescription: String? { description }
}

