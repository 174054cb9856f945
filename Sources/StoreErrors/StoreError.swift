public import Foundation

/// The one error type of ProtectedStore and of the SQL layer under it.
///
/// It holds what kind of failure it is (``code``), a sentence for a person (``message``), what caused it (``cause``,
/// the key-file or device error underneath, with its own details) and where it was raised (``location``); those four
/// are the shape of swift-nio's `FileSystemError`. For a failure of SQLite it also holds SQLite's own codes
/// (``resultCode``, ``extendedResultCode``), the statement (``sql``) and the file (``path``).
///
/// An app catches this one type wherever it is: a statement that fails inside `coordinator.write { db in … }`
/// throws it, and the same error comes out of `write`, `read` and `DataController.perform` unchanged.
/// Switch on ``code``; its ``Code/name`` is the short kebab-case word the command-line tool prints
/// (`store-damaged`, `queue-full`, …). A constraint's kind is in the extended result code:
///
/// ```swift
/// do {
///     try await coordinator.write { db in
///         try db.execute("INSERT INTO child(parent) VALUES (42)")
///     }
/// } catch let error as StoreError where error.code == .constraint {
///     print(error.extendedResultCode == 787 ? "no such parent" : "another constraint")
/// }
/// ```
///
/// Errors an app's own closure throws are never wrapped in this type: `perform` rethrows them unchanged.
/// Messages never contain key material or passcodes, and ``sql`` never holds a bound value.
public struct StoreError: Error, Sendable {
    /// What kind of failure this is, in every layer.
    ///
    /// The key layer's `SecureKeysError` and the device's `DeviceError` use this same type. Extensible: compare
    /// with the static members, show ``name``.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The short kebab-case word users see.
        public let name: String

        /// A code named `name`.
        ///
        /// The layer that raises it declares it once, as a static member.
        package init(_ name: String) { self.name = name }

        /// The word itself.
        public var description: String { name }

        // MARK: Launch and operations

        /// The operation queue is at its capacity.
        ///
        /// The operation was not queued.
        public static let queueFull = Code("queue-full")
        /// The operation was cancelled before it ran.
        public static let cancelled = Code("cancelled")
        /// The operation's deadline passed while it waited for protected data.
        public static let deadlineExceeded = Code("deadline-exceeded")
        /// The app terminated before the operation ran.
        public static let terminated = Code("terminated")
        /// The store has no locked inbox yet.
        ///
        /// Its inbox key is made when the store first attaches.
        public static let inboxUnavailable = Code("inbox-unavailable")
        /// An inbox append whose record would be larger than the limit.
        ///
        /// Nothing was written.
        public static let inboxRecordTooLarge = Code("inbox-record-too-large")
        /// An inbox record of a kind no handler of this app applies.
        ///
        /// It is kept in quarantine.
        public static let inboxUnknownKind = Code("inbox-unknown-kind")
        /// An inbox record written with a newer schema version than this app reads.
        ///
        /// It is kept in quarantine.
        public static let inboxNewerSchema = Code("inbox-newer-schema")
        /// An inbox record that opened but does not decode.
        ///
        /// It is kept in quarantine.
        public static let inboxRecordMalformed = Code("inbox-record-malformed")
        /// The locked inbox is at its size cap (`StoreConfiguration.inboxMaximumSize`).
        ///
        /// Nothing was written.
        public static let inboxFull = Code("inbox-full")
        /// The inbox path holds a file that cannot be opened, or something that is not a regular file.
        ///
        /// Something that is not a regular file is a link, a directory or a FIFO. It was left as it is.
        public static let inboxUnusable = Code("inbox-unusable")
        /// A failure with no more specific code.
        ///
        /// See ``StoreError/cause``.
        public static let storeError = Code("store-error")

        // MARK: The store file (SQLCipher)

        /// The key does not decrypt the file, or the file is not a database.
        public static let wrongKey = Code("wrong-key")
        /// The store file cannot be opened, read or written.
        public static let storeUnavailable = Code("store-unavailable")
        /// A page failed its authentication or the database is inconsistent.
        ///
        /// The file was left as it is.
        public static let storeDamaged = Code("store-damaged")
        /// A constraint was violated (a unique key, a foreign key, `NOT NULL`, a check).
        public static let constraint = Code("constraint")
        /// No space is left to write the store.
        public static let diskFull = Code("disk-full")
        /// The store or its folder cannot be written.
        public static let readOnly = Code("read-only")
        /// Another connection held a lock for longer than the busy timeout.
        public static let busy = Code("busy")
        /// The linked SQLite library is not SQLCipher.
        public static let notSQLCipher = Code("not-sqlcipher")
        /// SQLite was used wrongly (a bug in the caller).
        public static let misuse = Code("misuse")
        /// A record's update found no row with its primary key.
        ///
        /// Nothing was written.
        public static let recordNotFound = Code("record-not-found")
        /// The connection was closed.
        public static let closed = Code("closed")
        /// Any other SQLite failure.
        ///
        /// ``StoreError/extendedResultCode`` holds SQLite's extended result code.
        public static let sqliteError = Code("sqlite-error")

        // MARK: Migrations

        /// A migration threw (or its transaction failed) and was rolled back.
        ///
        /// The store stays at the last migration that succeeded. The message names the migration;
        /// ``StoreError/cause`` is its error.
        public static let migrationFailed = Code("migration-failed")
        /// The store records migrations this app does not know.
        ///
        /// A newer version of the app wrote it. It was not changed; the app must be updated.
        public static let storeFromNewerApp = Code("store-from-newer-app")
        /// `migrate` was asked for a store format the linked SQLCipher cannot write.
        ///
        /// Format 2 needs SQLCipher 4 or later; this machine links 3.4.1. The migration is refused before anything
        /// was touched. The message names the linked version and the format and library needed.
        public static let migrationUnsupported = Code("migration-unsupported")

        // MARK: Keys and restores (the key layer's own codes are declared in SecureKeys)

        /// A key source broke its contract with the attach (`StoreKeyProvider`).
        ///
        /// It gave or made a store's key but records nothing of it (`storeKeyRecord(forStoreAt:)` said none), or a
        /// malformed record. Nothing was created; the source must be fixed.
        public static let keySourceInconsistent = Code("key-source-inconsistent")
        /// An operation needs a call the app's key source does not implement.
        ///
        /// The source (`StoreKeyProvider`) keeps store keys outside the library's key files, and a restore must move
        /// a key (`moveStoreKey(from:to:)`) or a rewrite (`migrate`) must wrap it again in a key file
        /// (`storeKeyFile(forStoreAt:recording:)`). Nothing was changed. The message names the source and the call.
        public static let keySourceUnsupported = Code("key-source-unsupported")
        /// A restore whose target store (or one of its files) already exists.
        ///
        /// The restore was asked without the explicit flag that lets it put the old store aside. Nothing was changed.
        public static let restoreTargetExists = Code("restore-target-exists")

        /// The codes this module declares, the store's and the SQL layer's.
        ///
        /// The key layer (`SecureKeys`) and the device (`ProtectedData`) declare theirs beside the errors that
        /// raise them; `ProtectedStore` joins the three lists in `all`.
        package static let storeCodes: [Code] = [
            .queueFull, .cancelled, .deadlineExceeded, .terminated, .inboxUnavailable, .inboxRecordTooLarge,
            .inboxUnknownKind, .inboxNewerSchema, .inboxRecordMalformed, .inboxFull, .inboxUnusable, .storeError,
            .wrongKey, .storeUnavailable, .storeDamaged, .constraint, .diskFull, .readOnly, .busy, .notSQLCipher,
            .misuse, .recordNotFound, .closed, .sqliteError, .migrationFailed, .storeFromNewerApp,
            .migrationUnsupported, .keySourceInconsistent, .restoreTargetExists, .keySourceUnsupported,
        ]
    }

    /// Where an error was raised, for a bug report and never for control flow.
    public struct Location: Sendable, Hashable, CustomStringConvertible {
        /// The function that raised it.
        public var function: String
        /// The source file (`Module/File.swift`).
        public var file: String
        /// The line.
        public var line: Int

        /// A location in the source.
        public init(function: String, file: String, line: Int) {
            self.function = function
            self.file = file
            self.line = line
        }

        /// `file:line (function)`.
        public var description: String { "\(file):\(line) (\(function))" }
    }

    /// What kind of failure.
    public var code: Code
    /// A sentence for a person, without any secret.
    public var message: String
    /// The error underneath, or `nil` when this is the origin.
    ///
    /// It is a `SecureKeysError`, a `DeviceError`, the error a migration threw, or an error the app's own code threw
    /// during the attach.
    public var cause: (any Error)?
    /// Where it was raised.
    public var location: Location
    /// The statement that failed, when a statement did.
    ///
    /// It holds the statement's text only, never the values bound to it.
    public var sql: String?
    /// The database file, for a failure of SQLite.
    public var path: String?
    /// The identifier of the migration that failed, for an error a migration raised.
    ///
    /// Such an error is ``Code/migrationFailed``, or the store's own failure found while the migration ran. It is
    /// `nil` otherwise.
    public var migration: String?
    /// SQLite's extended result code, for an error SQLite reported.
    ///
    /// Extended codes are on for every connection. `SQLITE_CONSTRAINT_FOREIGNKEY` (787) and
    /// `SQLITE_CONSTRAINT_UNIQUE` (2067) are both ``Code/constraint``, `SQLITE_IOERR_FSYNC` (1034) and
    /// `SQLITE_IOERR_WRITE` (778) both ``Code/storeUnavailable``. It is `nil` for an error SQLite did not report.
    public package(set) var extendedResultCode: Int32?

    /// SQLite's primary result code, the low byte of ``extendedResultCode``.
    ///
    /// For example, `SQLITE_CONSTRAINT` is 19. It is `nil` for an error SQLite did not report.
    public var resultCode: Int32? { extendedResultCode.map { $0 & 0xff } }

    /// An error with a code, a message, and optionally its cause.
    ///
    /// - Parameters:
    ///   - code: what kind of failure.
    ///   - message: a sentence for a person; never a secret.
    ///   - cause: the error underneath, if any.
    ///   - function: the function that raised it (the caller's, by default).
    ///   - file: the file that raised it (the caller's, by default).
    ///   - line: the line that raised it (the caller's, by default).
    public init(
        code: Code, message: String, cause: (any Error)? = nil,
        function: String = #function, file: String = #fileID, line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.cause = cause
        self.location = Location(function: function, file: file, line: line)
    }

    /// An error of the SQL layer, with the statement, the file and SQLite's extended result code.
    ///
    /// `path` has no default so that a call without it is the public initializer's, never an ambiguous one.
    package init(
        code: Code, message: String, sql: String? = nil, path: String?, extendedResultCode: Int32? = nil,
        cause: (any Error)? = nil, function: String = #function, file: String = #fileID, line: Int = #line
    ) {
        self.init(code: code, message: message, cause: cause, function: function, file: file, line: line)
        self.sql = sql
        self.path = path
        self.extendedResultCode = extendedResultCode
    }
}

extension StoreError: CustomStringConvertible, LocalizedError {
    /// The message with the file and the statement when there are any, without the code word.
    ///
    /// It reads `message (path) in `sql``.
    public var detail: String {
        var text = message
        if let path { text += " (\(path))" }
        if let sql { text += " in `\(sql)`" }
        return text
    }

    /// `code: detail`, as the command-line tool prints it.
    public var description: String { "\(code.name): \(detail)" }
    /// The same text, which swift-argument-parser prints for errors a command throws.
    public var errorDescription: String? { description }
}
