package import SecureKeys
import Glibc

extension Database {
    /// How a copy is keyed.
    package enum CopyKeying {
        /// No key, for plain SQLite.
        case plaintext
        /// A raw 32-byte key.
        ///
        /// With `salt`, the new file's SQLCipher salt is set to it (a passphrase export's, whose key was derived
        /// with that salt).
        case raw(SecureBytes, salt: [UInt8]?)
    }

    /// The schema name a copy is attached under.
    static let copySchema = "protectedstore_copy"

    /// Copies the whole database, as of one read transaction, into a new file at `destination`.
    ///
    /// The copy is in the clear or under a key the user holds (``ExportEncryption``), and never over an existing
    /// file.
    ///
    /// The copy is written by SQLCipher's `sqlcipher_export()` into a database `ATTACH`ed at a temporary name
    /// beside `destination` (created empty with mode 0600 first, so the copy is never readable by others, not
    /// even for a moment), inside one `BEGIN DEFERRED` transaction: it sees one snapshot, and with WAL a writer
    /// on another connection goes on meanwhile. The temporary is synced, then given its name with `link(2)`
    /// — which fails rather than replace a file that appeared meanwhile — and the folder synced: a crash
    /// leaves no file at `destination`, or the whole copy. After a crash a temporary (`<destination>.tmp-…`,
    /// 0600) may be left beside it; for a plaintext export it holds data in the clear — remove it.
    ///
    /// The connection must be able to write (not ``Configuration/readOnly``: SQLite opens an attached file
    /// with the connection's own flags) and be outside a transaction.
    ///
    /// - Parameters:
    ///   - destination: the new file; its folder must exist.
    ///   - encryption: how the copy is encrypted.
    /// - Throws: `StoreError.Code.alreadyExists` when `destination` exists (nothing is written);
    ///   `StoreError.Code.invalidArgument` for a key that is not 32 bytes or an empty passphrase;
    ///   `StoreError.Code.misuse` inside a transaction or on a read-only connection; SQLite's and the file
    ///   system's failures (`disk-full`, `io-error`, …), after which no file is at `destination` and the
    ///   temporary is removed.
    public func export(to destination: String, encryption: ExportEncryption) throws {
        if SecureFile.exists(destination) { throw Self.copyExists(destination) }
        let keying: CopyKeying
        var derived: SecureBytes?
        defer { derived?.wipe() }
        switch encryption {
        case .plaintext:
            keying = .plaintext
        case .key(let key):
            guard key.count == StoreKeyFile.storeKeyLength else {
                throw StoreError(
                    code: .invalidArgument, message: "an export key is 32 bytes, got \(key.count)", path: destination)
            }
            keying = .raw(key, salt: nil)
        case .passphrase(let passphrase):
            guard passphrase.count > 0 else {
                throw StoreError(
                    code: .invalidArgument, message: "an empty passphrase would let anyone open the export", path: destination)
            }
            let salt = SystemRandom().bytes(count: PasscodeKDF.saltLength)
            let key: SecureBytes
            do {
                key = try ExportPassphrase.kdf.deriveKey(from: passphrase, salt: salt)
            } catch {
                throw Self.storeError(from: error)
            }
            derived = key
            keying = .raw(key, salt: salt)
        }
        let temporary = destination + ".tmp-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try writeCopy(toNewFileAt: temporary, keying: keying, format: .current)
        do {
            do {
                // link(2) fails with EEXIST instead of replacing: an export never overwrites a file.
                try DiskIO.link(temporary, to: destination, in: configuration.fileSystem)
            } catch let error as SecureKeysError where error.code == .alreadyExists {
                throw Self.copyExists(destination)
            }
            try DiskIO.unlink(temporary, in: configuration.fileSystem)
            try DiskIO.syncDirectory(SecureFile.folder(containing: destination), purpose: .newFileEntry, in: configuration.fileSystem)
        } catch {
            // What is at `destination` (if the link was made) is the whole copy; only the temporary goes.
            try? DiskIO.unlink(temporary, in: configuration.fileSystem)
            throw Self.storeError(from: error)
        }
    }

    /// A failure of the file seam (`SecureKeysError`) as the SQL layer's one error type.
    ///
    /// It keeps the failure as the cause, and its code word, or `disk-full` for `ENOSPC`, `EDQUOT` and `EFBIG`
    /// (as SQLite says `SQLITE_FULL`).
    static func storeError(from error: any Error) -> StoreError {
        switch error {
        case let error as StoreError:
            return error
        case let error as SecureKeysError:
            let full = error.code == .ioError && [ENOSPC, EDQUOT, EFBIG].contains(error.systemErrno ?? 0)
            return StoreError(
                code: full ? .diskFull : error.code, message: error.message, path: error.path,
                cause: error)
        default:
            return StoreError(code: .storeError, message: String(describing: error), cause: error)
        }
    }

    private static func copyExists(_ path: String) -> StoreError {
        StoreError(
            code: .alreadyExists,
            message: "a file is already there; an export never replaces one (choose another name, or remove it first)",
            path: path)
    }

    /// Writes a copy of the database, as of one read transaction, into the new file `path`.
    ///
    /// `path` must not exist. The copy is keyed as `keying` says and, when encrypted, in `format`, then synced.
    /// This is the machinery of ``export(to:encryption:)`` and of a store's rewrite (`migrate`), which give the
    /// file its final name.
    ///
    /// - Throws: `StoreError.Code.misuse` inside a transaction or on a read-only connection;
    ///   `StoreError.Code.alreadyExists` when `path` exists; `StoreError.Code.storeUnavailable` when the linked
    ///   SQLCipher cannot write `format`; SQLite's and the file system's failures, after which the file at
    ///   `path` (and its journal) is removed.
    package func writeCopy(toNewFileAt path: String, keying: CopyKeying, format: StoreFormat) throws {
        guard !isInTransaction else {
            throw StoreError(code: .misuse, message: "a copy is taken outside a transaction (ATTACH cannot run in one)", path: self.path)
        }
        guard !configuration.readOnly else {
            throw StoreError(
                code: .misuse, message: "a copy needs a connection that can write: an attached file opens read-only on a read-only connection",
                path: self.path)
        }
        // Settings first: a format the linked library cannot write is refused before any file is made.
        var settings: [String] = []
        if case .raw = keying {
            guard let library = SQLCipherVersion(reported: cipherVersion) else {
                throw StoreError(code: .storeUnavailable, message: "the linked SQLCipher reports version \"\(cipherVersion)\", which does not parse", path: path)
            }
            do {
                settings = try CipherSettings(format: format, library: library).pragmas.map {
                    $0.replacingOccurrences(of: "PRAGMA ", with: "PRAGMA \(Self.copySchema).")
                }
            } catch var error as StoreError {
                error.path = path
                throw error
            }
        }
        // Created here, empty, 0600 and exclusive: SQLite then opens an existing file, and the copy is never
        // readable by another user. Through DiskIO, so that a simulated disk and a fault plan see it.
        do {
            try DiskIO.open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600, in: configuration.fileSystem).close()
        } catch let error as SecureKeysError where error.systemErrno == EEXIST {
            throw StoreError(code: .alreadyExists, message: "a file is already there; a copy is only written to a new file", path: path)
        } catch {
            throw Self.storeError(from: error)
        }
        var attached = false
        do {
            let attach = try prepare("ATTACH DATABASE ? AS \(Self.copySchema) KEY ?")
            do {
                switch keying {
                case .plaintext:
                    try attach.execute([.text(path), .null], borrowingText: UnsafeRawBufferPointer(start: nil, count: 0), at: 2)
                case .raw(let key, let salt):
                    try Self.withRawKeyLiteral(key, salt: salt) { literal in
                        try attach.execute([.text(path), .null], borrowingText: literal, at: 2)
                    }
                }
            } catch var error as StoreError where error.resultCode == 14 {
                // SQLITE_CANTOPEN: ATTACH says "unable to open database: PATH"; said as SQLite says it for every
                // other file it cannot open, for the file it is.
                error.message = "unable to open database file \(path) to write the copy into"
                throw error
            }
            attached = true
            for pragma in settings { try execute(pragma) }
            // The copy's commit syncs its journal and then the file (SQLite's rollback journal, FULL).
            try execute("PRAGMA \(Self.copySchema).journal_mode = DELETE")
            try execute("PRAGMA \(Self.copySchema).synchronous = FULL")
            let userVersion = try scalar("PRAGMA main.user_version")?.int64 ?? 0
            try transaction(.deferred) {
                // The first read fixes the snapshot the whole copy is taken from.
                try execute("SELECT count(*) FROM main.sqlite_master")
                try execute("SELECT sqlcipher_export('\(Self.copySchema)')")
                // sqlcipher_export (3.4) copies the schema and rows, not the header's user_version.
                try execute("PRAGMA \(Self.copySchema).user_version = \(userVersion)")
            }
            try execute("DETACH DATABASE \(Self.copySchema)")
            attached = false
            // Synced once more as a file, so that its durability does not rest on SQLite's commit alone.
            let file = try DiskIO.open(path, flags: O_RDWR, in: configuration.fileSystem)
            defer { file.close() }
            try file.sync()
        } catch {
            if attached { try? execute("DETACH DATABASE \(Self.copySchema)") }
            try? DiskIO.unlink(path + "-journal", in: configuration.fileSystem)
            try? DiskIO.unlink(path, in: configuration.fileSystem)
            throw Self.storeError(from: error)
        }
    }
}
