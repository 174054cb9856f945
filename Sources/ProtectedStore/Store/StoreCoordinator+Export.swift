public import EncryptedSQLite

extension StoreCoordinator {
    /// Copies the store, as of one moment, into a new file the user can take away: a plain SQLite file, or one
    /// encrypted under a key the user holds (``ExportEncryption``) — never under the store key, which only this
    /// device's class key unwraps. keys/README.md (*Exports*) says how another program opens each.
    ///
    /// Runs while the app does: on a connection and a thread of its own, in one read transaction (WAL), so
    /// writes go on meanwhile and the copy holds exactly the transactions committed before it began. The
    /// copy is written under a temporary name beside `destination` (mode 0600 from its creation), synced,
    /// and given its name with `link(2)`, never over an existing file: after a crash there is no file at
    /// `destination`, or the whole copy (``Database/export(to:encryption:)``).
    ///
    /// - Parameters:
    ///   - destination: the new file; its folder must exist.
    ///   - encryption: how the copy is encrypted; ``ExportEncryption/plaintext`` only when the user asked for
    ///     their data in the clear.
    /// - Throws: `StoreError.Code.alreadyExists` when a file is at `destination` (nothing is written);
    ///   `StoreError.Code.protectedDataUnavailable` after the store closed; `invalid-argument` for a key
    ///   that is not 32 bytes; the disk's failures (`disk-full`, `io-error`), after which nothing is at
    ///   `destination`.
    public nonisolated func export(to destination: String, encryption: ExportEncryption) async throws {
        do {
            try await readers.withWritableConnection { database in
                try database.export(to: destination, encryption: encryption)
            }
        } catch {
            throw StoreError(wrapping: error)
        }
    }
}
