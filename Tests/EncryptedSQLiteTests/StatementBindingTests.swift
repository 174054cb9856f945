import CSQLCipher
import Foundation
import SecureKeys
import TestSupport
import Testing

@testable import EncryptedSQLite

/// What a cached statement keeps of its arguments after it ran (issue 26, "Speed and memory"): nothing. A
/// 4 MiB value bound once stayed in SQLite's memory until the statement ran again — a copy of a record's
/// value (or a secret) per cached statement, for the life of the connection.
@Suite("Statement bindings")
struct StatementBindingTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }

    @Test("a statement releases the values bound to it once it has run, for execute and for rows")
    func bindingsAreReleasedAfterARun() async {
        // In a process of its own: `sqlite3_memory_used` counts the whole process, and the tests running beside
        // this one open stores of their own (a clean-clone CI run saw 459,080 bytes of theirs here).
        await #expect(processExitsWith: .success) {
            let kept = try StatementBindingTests.bytesKeptAfterTwoRuns()
            if kept >= 256 << 10 {
                FileHandle.standardError.write(Data("SQLite kept \(kept) bytes after two runs that bound 1 MiB each\n".utf8))
                exit(1)
            }
        }
    }

    /// Runs a query and a statement once each with a 1 MiB argument, after both were prepared and cached, and
    /// returns how much more memory SQLite holds afterwards.
    static func bytesKeptAfterTwoRuns() throws -> Int64 {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.file("store.sqlite"), key: try SecureBytes.random(count: 32))
        defer { database.close() }
        try database.execute("CREATE TABLE t(x)")
        let large = String(repeating: "x", count: 1 << 20)
        // Prepared (and cached) first, so only what a run leaves behind is measured.
        _ = try database.rows("SELECT length(?)", [.text("")])
        try database.execute("DELETE FROM t WHERE x = ?", [.text("")])

        let before = sqlite3_memory_used()
        _ = try database.rows("SELECT length(?)", [.text(large)])
        try database.execute("DELETE FROM t WHERE x = ?", [.text(large)])
        return sqlite3_memory_used() - before
    }

    @Test("text bound in place is read where it lies, and released before execute returns")
    func borrowedTextIsReleased() throws {
        let database = try Database(path: directory.file("store.sqlite"), key: key)
        defer { database.close() }
        try database.execute("CREATE TABLE t(k, v)")
        let bytes = Array("caf\u{e9} au lait".utf8)
        try bytes.withUnsafeBytes { text in
            try database.execute("INSERT INTO t(k, v) VALUES (?, ?)", [.text("a"), .null], borrowingText: text, at: 2)
            try database.execute("INSERT INTO t(k, v) VALUES (?, ?)", [.text("b"), .null], borrowingText: UnsafeRawBufferPointer(rebasing: text[0..<0]), at: 2)
        }
        #expect(try database.scalar("SELECT v FROM t WHERE k = 'a'")?.string == "caf\u{e9} au lait")
        #expect(try database.scalar("SELECT typeof(v) FROM t WHERE k = 'b'")?.string == "text")
    }
}
