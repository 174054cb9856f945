internal import Foundation
package import SecureKeys
internal import StoreErrors
internal import Glibc

extension Database {
    /// Copies the whole database, as of one read transaction, into a new SQLCipher file at `path`.
    ///
    /// The file is keyed raw with `key` and written in `format`. It uses `sqlcipher_export`, SQLCipher's
    /// documented way to copy a database under another key, which copies every table, index, view and
    /// trigger, and `user_version`.
    ///
    /// The copy is taken from a snapshot: the connection attaches the new file (`ATTACH … KEY`, the raw-key
    /// literal bound as a parameter, built in guarded memory), sets every setting of `format` on it (the
    /// schema-qualified pragmas of ``CipherSettings``, since an attached database starts from the library's
    /// defaults), opens a deferred transaction, reads once so that the write-ahead log's snapshot is fixed,
    /// and exports. The writer is never stopped: in WAL mode a reader does not block it, and committed
    /// transactions the log has not checkpointed yet are in the snapshot.
    ///
    /// - Parameters:
    ///   - path: the new file; it must not exist. It is created with mode 0600 before SQLite opens it.
    ///   - key: its 32-byte key.
    ///   - format: its format.
    /// - Throws: `StoreError` (`store-unavailable`, `disk-full`, …) as SQLite reports the failure; the new
    ///   file may be left part-written and must be removed by the caller.
    package func exportSnapshot(to path: String, key: SecureBytes, format: StoreFormat) throws {
        guard key.count == 32 else {
            throw StoreError(code: .misuse, message: "a store key is 32 bytes, got \(key.count)", path: path)
        }
        guard let library = SQLCipherVersion(reported: cipherVersion) else {
            throw StoreError(code: .storeUnavailable, message: "the linked SQLCipher's version does not parse", path: path)
        }
        let settings = try CipherSettings(format: format, library: library)
        // Created here, empty and 0600, whatever the umask: SQLite would create it 0644 (less the umask) and
        // give its journal the same mode, and a restore renames this copy into place as the store.
        do {
            try DiskIO.open(path, flags: O_WRONLY | O_CREAT | O_EXCL, mode: 0o600, in: configuration.fileSystem).close()
        } catch {
            throw Self.storeError(from: error)
        }
        try Self.withRawKeyLiteral(key) { literal in
            try execute("ATTACH DATABASE ? AS snapshot_copy KEY ?", [.text(path), .null], borrowingText: literal, at: 2)
        }
        var attached = true
        defer { if attached { try? execute("DETACH DATABASE snapshot_copy") } }
        for pragma in settings.pragmas {
            try execute(pragma.replacingOccurrences(of: "PRAGMA ", with: "PRAGMA snapshot_copy."))
        }
        try execute("PRAGMA snapshot_copy.journal_mode = DELETE")
        try execute("PRAGMA snapshot_copy.synchronous = FULL")
        try transaction(.deferred) {
            // The first read fixes the snapshot every statement of the export reads.
            _ = try scalar("SELECT count(*) FROM main.sqlite_master")
            let userVersion = try scalar("PRAGMA main.user_version")?.int64 ?? 0
            _ = try scalar("SELECT sqlcipher_export('snapshot_copy')")
            try execute("PRAGMA snapshot_copy.user_version = \(userVersion)")
        }
        try execute("DETACH DATABASE snapshot_copy")
        attached = false
    }
}
