internal import Foundation
internal import StoreErrors
internal import SystemPackage

// How the SQL layer reports a failure: as the one `StoreError` an app catches everywhere, with SQLite's
// extended result code, the statement's text and the file on it. Raw result codes map to the code words here
// and nowhere else; the factories stay internal (GRDB: "library user is not supposed to be exposed to raw
// result codes" — an app reads them on the error, it never builds one from them).

extension StoreError {
    /// An error SQLite reported, with its extended result code (`resultCode`) and the `errno` of the failed
    /// system call, if any.
    init(
        resultCode: Int32, message: String, sql: String? = nil, path: String? = nil, systemErrno: Int32 = 0,
        function: String = #function, file: String = #fileID, line: Int = #line
    ) {
        if resultCode & 0xff == Self.sqliteIOError && Self.noSpaceErrnos.contains(systemErrno) {
            // SQLite reports SQLITE_FULL only for ENOSPC met as a short write; a write refused outright
            // (ENOSPC, EFBIG past RLIMIT_FSIZE, EDQUOT) comes back as SQLITE_IOERR_WRITE. Either way the
            // disk is full for this store, and that is what the user needs to read.
            self.init(
                code: .diskFull, message: "no space to write the store (\(message), \(Errno(rawValue: systemErrno).description))",
                sql: sql, path: path, extendedResultCode: resultCode, function: function, file: file, line: line)
            return
        }
        if resultCode == Self.sqliteError && message == Self.bareErrorMessage {
            // SQLCipher 3.4.1 reports a page that fails its HMAC as a bare SQLITE_ERROR carrying SQLite's
            // default text (the codec sets the pager's error without a message); an SQL error always has its own
            // message ("no such table: …", "near …: syntax error"). So this exact pair means a damaged page.
            self.init(
                code: .storeDamaged, message: "a page failed authentication (HMAC): the store file is damaged", sql: sql,
                path: path, extendedResultCode: resultCode, function: function, file: file, line: line)
            return
        }
        self.init(
            code: Code(sqliteResultCode: resultCode), message: message, sql: sql, path: path,
            extendedResultCode: resultCode, function: function, file: file, line: line)
    }

    static let sqliteError: Int32 = 1
    static let sqliteIOError: Int32 = 10
    /// The errors of a write that found no room.
    ///
    /// They are no space on the device, past the file-size limit, and over quota.
    static let noSpaceErrnos: Set<Int32> = [ENOSPC, EFBIG, EDQUOT]
    /// `sqlite3_errstr(SQLITE_ERROR)` in SQLite 3.15.2, which SQLCipher 3.4.1 is built on.
    static let bareErrorMessage = "SQL logic error or missing database"
}

extension StoreError.Code {
    /// The code word for a SQLite result code (primary or extended).
    init(sqliteResultCode resultCode: Int32) {
        switch resultCode & 0xff {
        case 26: self = .wrongKey  // SQLITE_NOTADB: SQLCipher cannot tell a wrong key from a file that is no database
        case 10, 14, 3, 23: self = .storeUnavailable  // SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_AUTH
        case 11: self = .storeDamaged  // SQLITE_CORRUPT
        case 19: self = .constraint  // SQLITE_CONSTRAINT
        case 13: self = .diskFull  // SQLITE_FULL
        case 8: self = .readOnly  // SQLITE_READONLY
        case 5, 6: self = .busy  // SQLITE_BUSY, SQLITE_LOCKED
        case 21, 25: self = .misuse  // SQLITE_MISUSE, SQLITE_RANGE
        default: self = .sqliteError
        }
    }
}
