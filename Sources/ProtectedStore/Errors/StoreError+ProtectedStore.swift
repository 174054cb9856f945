internal import DiskModel
internal import Foundation
internal import ProtectedData
internal import SecureKeys
public import StoreErrors

// What ProtectedStore adds to the one error type: wrapping the key and device layers' errors, and the named
// errors of the launch, the operation queue and the inbox. The type itself is in `StoreErrors`, below the
// SQL layer, so that a statement inside `write { }` throws the same type an app catches outside it.

extension StoreError {
    /// Wraps an error from a lower layer, keeping it as the `cause`.
    ///
    /// A `SecureKeysError` or `DeviceError` keeps its code word and message (a simulated disk's error is the key layer's `io-error` or
    /// `invalid-argument`). `CancellationError` becomes
    /// `StoreError.Code.cancelled`. A `StoreError` (every failure of the SQL layer is one) is returned as it is.
    /// Anything else becomes `StoreError.Code.storeError` with the error as its cause.
    ///
    /// - Parameters:
    ///   - error: the lower layer's error.
    ///   - function: the function that wraps it (the caller's, by default).
    ///   - file: the file that wraps it (the caller's, by default).
    ///   - line: the line that wraps it (the caller's, by default).
    public init(wrapping error: any Error, function: String = #function, file: String = #fileID, line: Int = #line) {
        switch error {
        case let error as StoreError:
            self = error
        case let error as SecureKeysError:
            // A key file, the keybag, the device state or the inbox refused for want of space is the same
            // condition as the store refused for it: one word, `disk-full`.
            let full = error.code == .ioError && error.systemErrno.map(Self.meansDiskFull) == true
            let readOnly = error.code == .ioError && error.systemErrno == EROFS
            self.init(
                code: full ? .diskFull : readOnly ? .readOnly : error.code, message: error.message, cause: error,
                function: function, file: file, line: line)
        case let error as DiskError:
            self.init(wrapping: SecureKeysError(error), function: function, file: file, line: line)
        case let error as DeviceError:
            self.init(code: error.code, message: error.message, cause: error, function: function, file: file, line: line)
        case is CancellationError:
            self.init(code: .cancelled, message: "the operation was cancelled", cause: error, function: function, file: file, line: line)
        default:
            self.init(code: .storeError, message: String(describing: error), cause: error, function: function, file: file, line: line)
        }
    }
}

extension StoreError.Code {
    /// Every code this version defines.
    ///
    /// The store's and the SQL layer's come first, then the key layer's, then the device's.
    ///
    /// Each layer declares its codes beside the error that raises them and lists them once; this joins the lists.
    public static let all: [Self] = storeCodes + secureKeysCodes + deviceCodes
}

extension StoreError {
    /// Whether `code` is what SQLite reports as `SQLITE_FULL`.
    ///
    /// That is no space (`ENOSPC`), a quota (`EDQUOT`) or the file-size limit (`EFBIG`).
    static func meansDiskFull(_ code: Int32) -> Bool { code == ENOSPC || code == EDQUOT || code == EFBIG }
}

// MARK: Named errors

extension StoreError {
    /// The operation queue is at its capacity.
    ///
    /// The operation was not queued.
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

    /// The store was closed by its app.
    ///
    /// The controller terminated, or the app closed it. Its coordinator stays closed; a later attach gives a new
    /// one.
    public static func storeClosed(function: String = #function, file: String = #fileID, line: Int = #line) -> Self {
        Self(
            code: .closed, message: "the store was closed by its app (terminated): its coordinator stays closed",
            function: function, file: file, line: line)
    }

    /// The store was closed because protected data became unavailable (a class-A store at the lock). It opens
    /// again, with a new coordinator, when protected data becomes available.
    public static func storeClosedAtLock(function: String = #function, file: String = #fileID, line: Int = #line) -> Self {
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

    /// The store file does not open with its own (authenticated) key.
    ///
    /// It is damaged or was replaced.
    public static func storeDamaged(
        path: String, cause: (any Error)?, function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .storeDamaged,
            message: "the store at \(path) does not open with its own key: it is damaged or was replaced; it was left as it is",
            cause: cause, function: function, file: file, line: line)
    }

    /// The store's key exists but the store file does not.
    ///
    /// Its key source holds the key, and no interrupted creation of that key's store explains it, so the store
    /// was lost. No new empty store is made in its place.
    package static func storeLost(
        _ files: StoreFiles, reason: String, cause: (any Error)? = nil,
        function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .storeUnavailable,
            message: "the store file \(files.database) is missing but its key source holds its key, and \(reason): the store was lost (moved, deleted, or not restored with its key). No new empty store is made in its place; every file was left as it is",
            cause: cause, function: function, file: file, line: line)
    }

    /// A key source broke its contract with the attach (`StoreKeyProvider`).
    ///
    /// It gave or made a key it records nothing of, or recorded it malformed. Nothing was created in the store's
    /// place.
    ///
    /// - Parameters:
    ///   - source: the key source, named by its type.
    ///   - storePath: the store being attached.
    ///   - what: what the source did, in words.
    package static func keySourceInconsistent(
        _ source: any Sendable, storePath: String, _ what: String,
        function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .keySourceInconsistent,
            message: "the key source \(type(of: source)) broke its contract attaching \(storePath): \(what). Nothing was created; every file was left as it is",
            function: function, file: file, line: line)
    }

    /// An inbox record would hold more than `SecureKeys/InboxRecord/maximumPayloadLength` bytes.
    public static func inboxRecordTooLarge(
        payloadLength: Int, function: String = #function, file: String = #fileID, line: Int = #line
    ) -> Self {
        Self(
            code: .inboxRecordTooLarge,
            message: "an inbox record's payload is at most \(InboxRecord.maximumPayloadLength) bytes (4 MiB): the value, key and kind plus \(InboxEntry.putFieldsLength) bytes of the record's own fields for a put (a put's value is at most \(InboxRecord.maximumPayloadLength - InboxEntry.putFieldsLength - InboxEntry.putKind.utf8.count) bytes less its key's length); this one would be \(payloadLength) bytes. Nothing was written",
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
