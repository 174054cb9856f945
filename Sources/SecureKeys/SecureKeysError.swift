public import Foundation
public import StoreErrors
import SystemPackage

/// An error from the key layer.
///
/// It says what went wrong, in words a person can act on, and where.
///
/// Messages never contain key material or passcodes: they name the file and the problem only.
public struct SecureKeysError: Error, Sendable {
    /// What kind of failure this is, as `StoreError.Code`, the one code type of every layer.
    ///
    /// The key layer's codes are declared in this module, in an extension of `StoreError.Code`.
    public typealias Code = StoreError.Code

    /// What kind of failure.
    public var code: Code
    /// A sentence for a person, without any secret.
    public var message: String
    /// The file concerned, when there is one.
    public var path: String?
    /// The underlying system error number, for I/O failures.
    public var systemErrno: Int32?
    /// Where the error was raised, for debugging.
    public var location: String

    /// An error of the key layer.
    ///
    /// - Parameters:
    ///   - code: what kind of failure.
    ///   - message: a sentence for a person; never a secret.
    ///   - path: the file concerned.
    ///   - systemErrno: the system error number of an I/O failure.
    ///   - file: the file that raised it (the caller's, by default).
    ///   - line: the line that raised it (the caller's, by default).
    public init(
        code: Code, message: String, path: String? = nil, systemErrno: Int32? = nil,
        file: StaticString = #fileID, line: UInt = #line
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.systemErrno = systemErrno
        self.location = "\(file):\(line)"
    }
}

extension StoreError.Code {
    // MARK: Keys and key files

    /// The passcode did not unwrap the class keys.
    public static let wrongPasscode = Self("wrong-passcode")
    /// A key file is truncated, altered or not a key file at all. Nothing was changed on disk.
    public static let keyFileDamaged = Self("key-file-damaged")
    /// A key file from a newer (or unknown) version of this format.
    public static let unsupportedKeyFormat = Self("unsupported-key-format")
    /// A keybag that belongs to another device (its integrity tag does not verify with this device key).
    public static let wrongDevice = Self("wrong-device")
    /// A secret was used after it was wiped (for instance a class key after the grace period).
    public static let keyWiped = Self("key-wiped")
    /// A store file exists but its key file does not.
    ///
    /// Creating a new key would orphan the data.
    public static let storeExistsWithoutKey = Self("store-exists-without-key")
    /// A file that is never overwritten already exists.
    public static let alreadyExists = Self("already-exists")
    /// A key file or directory is readable by others.
    public static let insecurePermissions = Self("insecure-permissions")
    /// A state directory (or a folder or the lock file in it) that another user owns or may write, a
    /// symbolic link, or one under a folder another user could swap it out of.
    ///
    /// It is refused, as OpenSSH's StrictModes refuses such a home folder.
    public static let insecureStateDirectory = Self("insecure-state-directory")
    /// A parameter is outside what a format or libsodium accepts.
    public static let invalidArgument = Self("invalid-argument")
    /// The file system refused a read or a write.
    public static let ioError = Self("io-error")
    /// libsodium could not allocate memory (Argon2id with too large a memory limit).
    public static let outOfMemory = Self("out-of-memory")

    // MARK: Backups

    /// A recovery phrase that is not one the library made.
    ///
    /// A character outside the alphabet, the wrong number of characters, or a checksum that does not match: a
    /// typing mistake, told apart from a phrase that is well formed but belongs to another recovery key.
    public static let recoveryPhraseMistyped = Self("recovery-phrase-mistyped")
    /// A well-formed recovery phrase that is not the one the backup was sealed to.
    public static let wrongRecoveryPhrase = Self("wrong-recovery-phrase")
    /// A backup file that is truncated, altered or not a backup, or whose database fails its integrity check.
    ///
    /// Nothing was restored from it and nothing was replaced.
    public static let backupDamaged = Self("backup-damaged")
    /// A backup file (or recovery key file) of a format version this build does not read.
    public static let unsupportedBackupFormat = Self("unsupported-backup-format")

    /// The codes this module declares, the ones a `SecureKeysError` carries.
    package static let secureKeysCodes: [Self] = [
        .wrongPasscode, .keyFileDamaged, .unsupportedKeyFormat, .wrongDevice, .keyWiped, .storeExistsWithoutKey,
        .alreadyExists, .insecurePermissions, .insecureStateDirectory, .invalidArgument, .ioError, .outOfMemory,
        .recoveryPhraseMistyped, .wrongRecoveryPhrase, .backupDamaged, .unsupportedBackupFormat,
    ]

    // MARK: Former names

    /// The former name of ``keyFileDamaged``.
    @available(*, deprecated, renamed: "keyFileDamaged")
    public static var damaged: Self { .keyFileDamaged }
    /// The former name of ``unsupportedKeyFormat``.
    @available(*, deprecated, renamed: "unsupportedKeyFormat")
    public static var unsupportedFormat: Self { .unsupportedKeyFormat }
    /// The former name of ``ioError``.
    @available(*, deprecated, renamed: "ioError")
    public static var io: Self { .ioError }
}

extension SecureKeysError {
    /// The passcode did not unwrap the class keys.
    public static func wrongPasscode(file: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(code: .wrongPasscode, message: "wrong passcode", file: file, line: line)
    }

    /// A key file is truncated, altered or not a key file.
    ///
    /// `what` says how.
    public static func damaged(
        _ what: String, path: String? = nil, file: StaticString = #fileID, line: UInt = #line
    ) -> Self {
        Self(code: .keyFileDamaged, message: "damaged key file: \(what); it was left as it is", path: path, file: file, line: line)
    }

    /// A key file of a newer or unknown format version.
    public static func unsupportedFormat(
        _ what: String, path: String? = nil, file: StaticString = #fileID, line: UInt = #line
    ) -> Self {
        Self(code: .unsupportedKeyFormat, message: "unsupported key file format: \(what)", path: path, file: file, line: line)
    }

    /// A keybag that does not verify with this device's key.
    public static func wrongDevice(path: String? = nil, file: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(
            code: .wrongDevice,
            message: "the keybag does not verify with this device's key (damaged, or from another device)",
            path: path, file: file, line: line)
    }

    /// A secret used after it was wiped.
    public static func keyWiped(file: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(code: .keyWiped, message: "the key was wiped from memory and can no longer be used", file: file, line: line)
    }

    /// A store file exists at `storePath` without its key file.
    public static func storeExistsWithoutKey(
        storePath: String, file: StaticString = #fileID, line: UInt = #line
    ) -> Self {
        Self(
            code: .storeExistsWithoutKey,
            message: "a store exists at \(storePath) but its key file is missing; refusing to create a new key over existing data",
            path: storePath, file: file, line: line)
    }

    /// `path` exists and is never overwritten.
    public static func alreadyExists(path: String, file: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(code: .alreadyExists, message: "\(path) already exists and is never overwritten", path: path, file: file, line: line)
    }

    /// `path` is accessible to other users (its `mode`).
    public static func insecurePermissions(
        path: String, mode: UInt32, file: StaticString = #fileID, line: UInt = #line
    ) -> Self {
        Self(
            code: .insecurePermissions,
            message: "\(path) is accessible to other users (mode \(String(mode & 0o777, radix: 8))); expected 0600 for files, 0700 for directories",
            path: path, file: file, line: line)
    }

    /// The folder (or lock file) at `path` is not safe to keep keys in.
    ///
    /// `problem` says what was found and the fix.
    public static func insecureStateDirectory(
        _ problem: String, path: String, file: StaticString = #fileID, line: UInt = #line
    ) -> Self {
        Self(code: .insecureStateDirectory, message: "refusing \(path): \(problem)", path: path, file: file, line: line)
    }

    /// A parameter outside what a format or libsodium accepts.
    public static func invalidArgument(_ what: String, file: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(code: .invalidArgument, message: what, file: file, line: line)
    }

    /// The file system refused `operation` on `path` with `errno`.
    public static func io(
        _ operation: String, path: String, errno: Int32, file: StaticString = #fileID, line: UInt = #line
    ) -> Self {
        Self(
            code: .ioError, message: "\(operation) \(path): \(Errno(rawValue: errno).description)",
            path: path, systemErrno: errno, file: file, line: line)
    }

    /// libsodium could not allocate memory.
    public static func outOfMemory(_ what: String, file: StaticString = #fileID, line: UInt = #line) -> Self {
        Self(code: .outOfMemory, message: what, file: file, line: line)
    }
}

extension SecureKeysError: CustomStringConvertible, LocalizedError {
    /// `code: message`.
    public var description: String { "\(code.name): \(message)" }
    /// swift-argument-parser prints this for errors a command throws.
    public var errorDescription: String? { description }
}
