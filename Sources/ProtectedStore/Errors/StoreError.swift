public import Foundation
internal import EncryptedSQLite
internal import ProtectedData
internal import SecureKeys

/// The error an app sees from ProtectedStore: what kind of failure (``code``), a sentence for a person
/// (``message``), what caused it (``cause``: the SQLite, key-file or device error underneath, with its own
/// details) and where it was raised (``location``) — the shape of swift-nio's `FileSystemError`.
///
/// Switch on ``code``; its ``Code/name`` is the short kebab-case word the command-line tool prints
/// (`store-damaged`, `queue-full`, …). Errors an app's own closure throws are never wrapped in this type:
/// ``DataController/perform(_:deadline:_:)`` rethrows them unchanged.
///
/// Messages never contain key material or passcodes.
public struct StoreError: Error, Sendable {
    /// What kind of failure this is. Extensible: compare with the static members, show ``name``.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The short kebab-case word users see.
        public let name: String

        /// A code of the harness or the command-line tool (`app-not-running`), or one a lower layer named.
        package init(_ name: String) { self.name = name }

        /// The word itself.
        public var description: String { name }

        // MARK: Launch and operations

        /// The operation queue is at its capacity; the operation was not queued.
        public static let queueFull = Code("queue-full")
        /// The operation was cancelled before it ran.
        public static let cancelled = Code("cancelled")
        /// The operation's deadline passed while it waited for protected data.
        public static let deadlineExceeded = Code("deadline-exceeded")
        /// The app terminated before the operation ran.
        public static let terminated = Code("terminated")
        /// The store's protection class is not available now (the device is locked or has not been unlocked
        /// since boot), or the store was closed because it became unavailable.
        public static let protectedDataUnavailable = Code("protected-data-unavailable")
        /// The store has no locked inbox yet: its inbox key is made when the store first attaches.
        public static let inboxUnavailable = Code("inbox-unavailable")
        /// An inbox append whose record would be larger than the limit; nothing was written.
        public static let inboxRecordTooLarge = Code("inbox-record-too-large")
        /// An inbox record of a kind no handler of this app applies; it is kept in quarantine.
        public static let inboxUnknownKind = Code("inbox-unknown-kind")
        /// An inbox record written with a newer schema version than this app reads; kept in quarantine.
        public static let inboxNewerSchema = Code("inbox-newer-schema")
        /// An inbox record that opened but does not decode; kept in quarantine.
        public static let inboxRecordMalformed = Code("inbox-record-malformed")
        /// The locked inbox is at its size cap (``StoreConfiguration/inboxMaximumSize``); nothing was written.
        public static let inboxFull = Code("inbox-full")
        /// The inbox path holds something that is not a regular file (a link, a directory, a FIFO), or a file
        /// that cannot be opened; it was left as it is.
        public static let inboxUnusable = Code("inbox-unusable")
        /// A failure with no more specific code; see ``StoreError/cause``.
        public static let storeError = Code("store-error")

        // MARK: The store file (SQLCipher)

        /// The key does not decrypt the file, or the file is not a database.
        public static let wrongKey = Code("wrong-key")
        /// The store file cannot be opened, read or written.
        public static let storeUnavailable = Code("store-unavailable")
        /// A page failed its authentication or the database is inconsistent; the file was left as it is.
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
        /// The connection was closed.
        public static let closed = Code("closed")
        /// Any other SQLite failure; the cause holds SQLite's extended result code.
        public static let sqliteError = Code("sqlite-error")

        // MARK: Migrations

        /// A migration failed at attach and was rolled back: the store stays at the last migration that
        /// succeeded (``StoreError/cause`` is the `MigrationError`, whose cause is the migration's error).
        public static let migrationFailed = Code("migration-failed")
        /// The store records migrations this app does not know: a newer version of the app wrote it. It was
        /// not changed; the app must be updated.
        public static let storeFromNewerApp = Code("store-from-newer-app")

        // MARK: Keys and key files

        /// A key file is truncated, altered or not a key file; nothing was changed on disk.
        public static let keyFileDamaged = Code("key-file-damaged")
        /// A key file from a newer or unknown format version.
        public static let unsupportedKeyFormat = Code("unsupported-key-format")
        /// A key file or keybag belongs to another device.
        public static let wrongDevice = Code("wrong-device")
        /// A key was used after it was wiped from memory.
        public static let keyWiped = Code("key-wiped")
        /// A store file exists without its key file; no new key is made over existing data.
        public static let storeExistsWithoutKey = Code("store-exists-without-key")
        /// A file that is never overwritten already exists.
        public static let alreadyExists = Code("already-exists")
        /// A key file or folder is accessible to other users.
        public static let insecurePermissions = Code("insecure-permissions")
        /// A state directory, or a folder or the lock file in it, that another user owns or may write, or a link.
        public static let insecureStateDirectory = Code("insecure-state-directory")
        /// A parameter is outside what a format or libsodium accepts.
        public static let invalidArgument = Code("invalid-argument")
        /// The file system refused a read or a write.
        public static let ioError = Code("io-error")
        /// Memory for a key could not be allocated.
        public static let outOfMemory = Code("out-of-memory")

        // MARK: The device

        /// No device is set up in the state directory.
        public static let noDevice = Code("no-device")
        /// A device is already set up there; it is never replaced.
        public static let deviceExists = Code("device-exists")
        /// The passcode was wrong.
        public static let wrongPasscode = Code("wrong-passcode")
        /// A passcode was tried during the delay after wrong passcodes.
        public static let passcodeDelay = Code("passcode-delay")
        /// The device erased its keys after too many wrong passcodes.
        public static let deviceWiped = Code("device-wiped")
        /// The device's state file is damaged; it was left as it is.
        public static let deviceStateDamaged = Code("device-state-damaged")
        /// Another device owns the state directory: another process runs one on it (the message names its
        /// process id), or this process already does.
        public static let stateInUse = Code("state-in-use")
        /// The device agent refused this process (another user, too many clients, a malformed request).
        public static let agentRefused = Code("agent-refused")
        /// The device agent went away while this process used it; its state is on disk.
        public static let agentDisconnected = Code("agent-disconnected")
        /// The device agent could not start (its socket cannot be made).
        public static let agentFailed = Code("agent-failed")
        /// A device setting or new passcode outside the device's rules (an empty passcode not asked for).
        public static let invalidDeviceSetting = Code("invalid-device-setting")
        /// The device began erasing its keys and could not finish yet; it finishes at the next attempt or boot.
        public static let wipeIncomplete = Code("wipe-incomplete")
        /// The process serving the state directory's agent socket runs as another user: nothing was sent to it.
        public static let untrustedAgent = Code("untrusted-agent")

        /// Every code this version defines, in the order above.
        public static let all: [Code] = [
            .queueFull, .cancelled, .deadlineExceeded, .terminated, .protectedDataUnavailable, .inboxUnavailable,
            .inboxRecordTooLarge, .inboxUnknownKind, .inboxNewerSchema, .inboxRecordMalformed, .inboxFull, .inboxUnusable, .storeError, .wrongKey, .storeUnavailable, .storeDamaged, .constraint, .diskFull, .readOnly, .busy,
            .notSQLCipher, .misuse, .closed, .sqliteError, .migrationFailed, .storeFromNewerApp, .keyFileDamaged, .unsupportedKeyFormat, .wrongDevice,
            .keyWiped, .storeExistsWithoutKey, .alreadyExists, .insecurePermissions, .insecureStateDirectory, .invalidArgument, .ioError,
            .outOfMemory, .noDevice, .deviceExists, .wrongPasscode, .passcodeDelay, .deviceWiped, .deviceStateDamaged,
            .stateInUse, .agentRefused, .agentDisconnected, .agentFailed, .invalidDeviceSetting, .wipeIncomplete,
            .untrustedAgent,
        ]
    }

    /// Where an error was raised: for a bug report, never for control flow.
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
    /// The error underneath: a `SQLiteError` (with SQLite's extended result code), a `SecureKeysError`, a
    /// `DeviceError`, or an error the app's own code threw during the attach; `nil` when this is the origin.
    public var cause: (any Error)?
    /// Where it was raised.
    public var location: Location

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

    /// Wraps an error from a lower layer, keeping it as the ``cause``: a `SQLiteError`, `SecureKeysError` or
    /// `DeviceError` keeps its code word and message; `CancellationError` becomes ``Code/cancelled``; a
    /// `StoreError` is returned as it is; anything else becomes ``Code/storeError`` with the error as its cause.
    public init(wrapping error: any Error, function: String = #function, file: String = #fileID, line: Int = #line) {
        switch error {
        case let error as StoreError:
            self = error
        case let error as SQLiteError:
            self.init(code: Code(error.code.name), message: error.detail, cause: error, function: function, file: file, line: line)
        case let error as MigrationError:
            self.init(code: Code(error.code.name), message: error.message, cause: error, function: function, file: file, line: line)
        case let error as SecureKeysError:
            // A key file, the keybag, the device state or the inbox refused for want of space is the same
            // condition as the store refused for it: one word, `disk-full`.
            let full = error.code == .io && error.systemErrno.map(Self.meansDiskFull) == true
            let readOnly = error.code == .io && error.systemErrno == EROFS
            self.init(
                code: full ? .diskFull : readOnly ? .readOnly : Code(error.code.name), message: error.message, cause: error,
                function: function, file: file, line: line)
        case let error as DeviceError:
            self.init(code: Code(error.code.name), message: error.message, cause: error, function: function, file: file, line: line)
        case is CancellationError:
            self.init(code: .cancelled, message: "the operation was cancelled", cause: error, function: function, file: file, line: line)
        default:
            self.init(code: .storeError, message: String(describing: error), cause: error, function: function, file: file, line: line)
        }
    }
}

extension StoreError {
    /// No space (`ENOSPC`), a quota (`EDQUOT`) or the file-size limit (`EFBIG`): what SQLite reports as `SQLITE_FULL`.
    static func meansDiskFull(_ code: Int32) -> Bool { code == ENOSPC || code == EDQUOT || code == EFBIG }
}

extension StoreError: CustomStringConvertible, LocalizedError {
    /// `code: message`, as the command-line tool prints it.
    public var description: String { "\(code.name): \(message)" }
    /// The same text; swift-argument-parser prints this for errors a command throws.
    public var errorDescription: String? { description }
}

// MARK: Named errors

extension StoreError {
    /// The operation queue is at its capacity; the operation was not queued.
    public static func queueFull(capacity: Int, function: String = #function, file: String = #fileID, line: Int = #line) -> Self {
        Self(
            code: .queueFull, message: "the operation queue is full (\(capacity) operations waiting for protected data)",
            function: function, file: file, line: line)
    }

    /// The operation was cancelled before it ran.
    public static func cancelled(function: String = #function, file: String = #fileID, line: Int = #line) -> Self {
        Self(code: .cancelled, message: "the operation was cancelled before it ran", function: function, file: file, line: line)
    }

    /// The operation's deadline passed before it could run.
    public static func deadlineExceeded(function: String = #function, file: String = #fileID, line: Int = #line) -> Self {
        Self(
            code: .deadlineExceeded, message: "the operation's deadline passed while it waited for protected data",
            function: function, file: file, line: line)
    }

    /// The app terminated before the operation ran.
    public static func terminated(function: String = #function, file: String = #fileID, line: Int = #line) -> Self {
        Self(code: .terminated, message: "the app terminated before the operation ran", function: function, file: file, line: line)
    }

    /// The store was closed because protected data became unavailable (a class-A store at the lock).
    public static func storeClosed(function: String = #function, file: String = #fileID, line: Int = #line) -> Self {
        Self(
            code: .protectedDataUnavailable, message: "the store was closed because protected data became unavailable",
            function: function, file: file, line: line)
    }

    /// The store's protection class is not available now.
    public static func protectedDataUnavailable(
        _ protectionClass: ProtectionClass, cause: (any Error)? = nil,
        function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .protectedDataUnavailable,
            message: "protected data of class \(protectionClass.name) is unavailable (the device is locked or has not been unlocked since boot)",
            cause: cause, function: function, file: file, line: line)
    }

    /// The store has no locked inbox yet.
    public static func inboxUnavailable(function: String = #function, file: String = #fileID, line: Int = #line) -> Self {
        Self(
            code: .inboxUnavailable, message: "the store has no inbox yet: its inbox key is made when the store first attaches",
            function: function, file: file, line: line)
    }

    /// The store file does not open with its own (authenticated) key: it is damaged or was replaced.
    public static func storeDamaged(
        path: String, cause: (any Error)?, function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .storeDamaged,
            message: "the store at \(path) does not open with its own key: it is damaged or was replaced; it was left as it is",
            cause: cause, function: function, file: file, line: line)
    }

    /// The store's key file exists but the store file does not, and no interrupted creation of that key's
    /// store explains it: the store was lost. No new empty store is made in its place.
    package static func storeLost(
        _ files: StoreFiles, reason: String, cause: (any Error)? = nil,
        function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .storeUnavailable,
            message: "the store file \(files.database) is missing but its key file \(files.key) exists, and \(reason): the store was lost (moved, deleted, or not restored with its key file). No new empty store is made in its place; every file was left as it is",
            cause: cause, function: function, file: file, line: line)
    }

    /// The store itself failed while the migrations read or wrote it — a page that fails its HMAC
    /// (`store-damaged`), a read or write the file system refused (`store-unavailable`), a full disk, a
    /// read-only file — or `nil` when the migration failed for a reason of its own (`migration-failed`).
    ///
    /// - Parameter error: the migrator's error; it stays the ``cause``, and its own cause is SQLite's error.
    package static func storageFailure(
        during error: MigrationError, function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self? {
        guard let storage = error.cause as? SQLiteError else { return nil }
        let code: Code
        switch storage.code {
        case .corrupt, .wrongKey: code = .storeDamaged  // the key is the store's own: a page that fails is damage
        case .unavailable: code = .storeUnavailable
        case .diskFull: code = .diskFull
        case .readOnly: code = .readOnly
        default: return nil
        }
        let place = error.migration.map { "while migration `\($0)` ran (it was rolled back)" } ?? "while the applied migrations were read"
        let what = code == .storeDamaged ? "the store is damaged: " : ""
        return Self(
            code: code, message: "\(what)\(storage.detail) — found \(place); the store was left as it is, at its last good migration",
            cause: error, function: function, file: file, line: line)
    }

    /// An inbox record would hold more than `SecureKeys/InboxRecord/maximumPayloadLength` bytes.
    public static func inboxRecordTooLarge(
        payloadLength: Int, function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .inboxRecordTooLarge,
            message: "an inbox record holds at most \(InboxRecord.maximumPayloadLength) bytes (4 MiB) of value, key and kind together; this one would be \(payloadLength) bytes. Nothing was written",
            function: function, file: file, line: line)
    }

    /// An append would make the inbox larger than its cap.
    public static func inboxFull(
        path: String, size: Int, adding: Int, maximum: Int, function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .inboxFull,
            message: "the inbox at \(path) holds \(size) bytes; \(adding) more would pass its cap of \(maximum) bytes. Nothing was written: it empties when the store next attaches",
            function: function, file: file, line: line)
    }

    /// The inbox path is not a regular file the store can use.
    public static func inboxUnusable(
        path: String, reason: String, function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .inboxUnusable, message: "the inbox at \(path) is \(reason); it was left as it is",
            function: function, file: file, line: line)
    }

    /// No handler of this app applies records of `kind`.
    public static func inboxUnknownKind(
        _ kind: String, id: InboxEntry.ID, function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .inboxUnknownKind, message: "inbox record \(id) is of kind `\(kind)`, which this app does not apply",
            function: function, file: file, line: line)
    }

    /// A record written with a newer schema version than this app reads.
    public static func inboxNewerSchema(
        kind: String, version: Int, known: Int, id: InboxEntry.ID,
        function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .inboxNewerSchema,
            message: "inbox record \(id) of kind `\(kind)` has schema version \(version); this app reads up to \(known)",
            function: function, file: file, line: line)
    }

    /// A record that opened but does not decode.
    public static func inboxRecordMalformed(
        id: InboxEntry.ID, _ what: String, cause: (any Error)? = nil,
        function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .inboxRecordMalformed, message: "inbox record \(id) is malformed: \(what)", cause: cause,
            function: function, file: file, line: line)
    }
}
