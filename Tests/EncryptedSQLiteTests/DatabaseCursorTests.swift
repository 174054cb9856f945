import CSQLCipher
import Foundation
import SecureKeys
import TestSupport
import Testing

@testable import EncryptedSQLite

private struct Item: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64
    var label: String
}

/// Cursors (issue 27, item 11): the rows of a query read one at a time, never all at once, and never past the
/// transaction that opened them.
@Suite("Database cursors")
struct DatabaseCursorTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }

    func open(rows: Int = 10) throws -> Database {
        let database = try Database(path: directory.file("store.sqlite"), key: key)
        try database.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, label TEXT NOT NULL)")
        try database.transaction {
            for id in 1...Int64(rows) { try Item(id: id, label: "item \(id)").insert(database) }
        }
        return database
    }

    static let allItems = "SELECT * FROM item ORDER BY id"

    @Test("a cursor yields the rows in order, decoded as fetchAll decodes them, then nil, and nil again")
    func cursorYieldsEveryRow() throws {
        let database = try open()
        let cursor = try database.fetchCursor(Item.self, Self.allItems)
        var items: [Item] = []
        while let item = try cursor.next() { items.append(item) }
        #expect(items == (try database.fetchAll(Item.self, Self.allItems)))
        #expect(items.map(\.id) == Array(1...10))
        #expect(try cursor.next() == nil)

        let rows = try database.rowCursor("SELECT id, label FROM item WHERE id > ? ORDER BY id", [8])
        var labels: [String] = []
        try rows.forEach { labels.append(try $0.decode(String.self, column: "label")) }
        #expect(labels == ["item 9", "item 10"])

        let table = try Item.fetchCursor(database)
        var count = 0
        while try table.next() != nil { count += 1 }
        #expect(count == 10)
    }

    @Test("the statement an open cursor steps through is not handed out by the cache: the same SQL run meanwhile leaves the cursor where it was")
    func cachedStatementIsNotResetUnderACursor() throws {
        let database = try open()
        let cursor = try database.fetchCursor(Item.self, Self.allItems)
        #expect(try cursor.next()?.id == 1)
        #expect(try cursor.next()?.id == 2)
        // The same SQL, through the cache, while the cursor is half-way.
        #expect(try database.fetchAll(Item.self, Self.allItems).count == 10)
        #expect(try database.fetchOne(Item.self, Self.allItems)?.id == 1)
        // A second cursor of the same SQL, interleaved with the first.
        let second = try database.fetchCursor(Item.self, Self.allItems)
        #expect(try second.next()?.id == 1)
        #expect(try cursor.next()?.id == 3)
        #expect(try second.next()?.id == 2)
        var rest: [Int64] = []
        while let item = try cursor.next() { rest.append(item.id) }
        #expect(rest == Array(4...10))
        // Once the cursor ended, its statement is the cache's again.
        #expect(database.cachesStatement(Self.allItems))
        #expect(try database.fetchAll(Item.self, Self.allItems).count == 10)
    }

    @Test("a cursor kept past the transaction that opened it fails with misuse saying so, and holds no statement")
    func cursorEscapingItsTransactionFails() throws {
        let database = try open()
        let escaped = try database.transaction(.deferred) { () -> DatabaseCursor<Item> in
            let cursor = try database.fetchCursor(Item.self, Self.allItems)
            #expect(try cursor.next()?.id == 1)
            return cursor
        }
        // Ended with its transaction, before anyone touched it again: it keeps no read going, so this
        // connection sees what another one commits afterwards (a statement left half-way would hold the old
        // snapshot open).
        let writer = try Database(path: directory.file("store.sqlite"), key: key)
        _ = try writer.transaction { try Item(id: 11, label: "item 11").insert(writer) }
        #expect(try database.fetchValue(Int.self, "SELECT count(*) FROM item") == 11)

        let error = #expect(throws: StoreError.self) { try escaped.next() }
        #expect(error?.code == .misuse)
        #expect(error?.message.contains("after the read or write that opened it ended") == true)
        // Not even in a later transaction.
        _ = try database.transaction(.deferred) {
            #expect(throws: StoreError.self) { try escaped.next() }
        }
        // Ended at the transaction's end: its statement was reset, so the writer can take the database and the
        // cached statement runs from the first row.
        _ = try database.transaction { try Item(id: 12, label: "item 12").insert(database) }
        #expect(try database.fetchAll(Item.self, Self.allItems).map(\.id) == Array(1...12))

        // A cursor not started before its transaction ended fails the same way.
        let unstarted = try database.transaction(.deferred) { try Item.fetchCursor(database) }
        #expect(throws: StoreError.self) { try unstarted.next() }
    }

    @Test("a row that does not decode mid-iteration throws misuse naming the column, ends the cursor, and leaves the connection usable")
    func decodingErrorMidIteration() throws {
        let database = try open()
        try database.execute("CREATE TABLE loose(id INTEGER PRIMARY KEY, label)")
        try database.execute("INSERT INTO loose(id, label) VALUES (1, 'one'), (2, 'two'), (3, NULL), (4, 'four')")
        let sql = "SELECT id, label FROM loose ORDER BY id"
        let seen = try database.transaction { () -> [Int64] in
            let cursor = try database.fetchCursor(Item.self, sql)
            var seen: [Int64] = []
            let error = #expect(throws: StoreError.self) {
                while let item = try cursor.next() { seen.append(item.id) }
            }
            #expect(error?.code == .misuse)
            #expect(error?.message.contains("`label`") == true)
            // Ended: no row 4 after the failure, and the statement is free for the next query of that SQL.
            #expect(try cursor.next() == nil)
            #expect(try database.fetchValues(Int64.self, "SELECT id FROM loose ORDER BY id") == [1, 2, 3, 4])
            try database.execute("DELETE FROM loose WHERE id = 3")
            #expect(try database.fetchAll(Item.self, sql).map(\.id) == [1, 2, 4])
            return seen
        }
        #expect(seen == [1, 2])
        // The transaction the cursor failed in committed.
        #expect(try database.fetchValue(Int.self, "SELECT count(*) FROM loose") == 3)
    }

    @Test("an error thrown by forEach's body ends the cursor and reaches the caller; the transaction rolls back")
    func bodyErrorMidIteration() throws {
        struct Stop: Error {}
        let database = try open()
        var visited: [Int64] = []
        #expect(throws: Stop.self) {
            try database.transaction {
                try Item(id: 100, label: "added").insert(database)
                try Item.fetchCursor(database).forEach { item in
                    visited.append(item.id)
                    if item.id == 5 { throw Stop() }
                }
            }
        }
        #expect(visited == [1, 2, 3, 4, 5])
        #expect(try Item.fetchCount(database) == 10)
        #expect(database.isInTransaction == false)
        // Nothing was left holding the table's statement: a write and a full read go through.
        try Item(id: 100, label: "added").insert(database)
        #expect(try Item.fetchAll(database).count == 11)
    }

    @Test("a cursor over 100,000 rows holds one row at a time: memory does not grow while it iterates")
    func cursorMemoryIsBounded() async {
        // In a process of its own: the heap and SQLite's allocations are the whole process's, and the tests
        // running beside this one allocate too.
        await #expect(processExitsWith: .success) {
            let growth = try DatabaseCursorTests.heapGrowthOverCursor()
            // 100,000 rows of 200 bytes are more than 20 MB once decoded into an array; a cursor keeps one.
            if growth >= 4 << 20 {
                FileHandle.standardError.write(Data("the resident size grew by \(growth) bytes over 100,000 rows\n".utf8))
                exit(1)
            }
        }
    }

    /// Writes 100,000 rows, iterates them with a cursor, and returns how much the process's resident size
    /// (Swift's allocations and SQLite's alike) grew from just before the cursor opened to the largest it was
    /// while the cursor iterated; exits 2 when the iteration itself goes wrong.
    static func heapGrowthOverCursor() throws -> Int {
        let directory = TemporaryDirectory()
        var configuration = Database.Configuration()
        // A small page cache: it fills as a scan reads new pages, and at the default 32 MiB it would hold the
        // whole table, which is SQLite caching pages, not the cursor keeping rows.
        configuration.cacheSizeKiB = 1024
        let database = try Database(path: directory.file("big.sqlite"), key: try SecureBytes.random(count: 32), configuration: configuration)
        defer { database.close() }
        try database.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, label TEXT NOT NULL)")
        let filler = String(repeating: "x", count: 200)
        try database.transaction {
            for id in 1...Int64(100_000) { try Item(id: id, label: filler).insert(database) }
        }
        // Warm up: the statement prepared and cached, the page cache full, the allocator's pools in use.
        try database.transaction(.deferred) {
            let cursor = try Item.fetchCursor(database)
            for _ in 0..<1_000 { _ = try cursor.next() }
        }
        return try database.transaction(.deferred) {
            let baseline = residentBytes()
            let cursor = try Item.fetchCursor(database)
            var count = 0
            var peak = baseline
            while let item = try cursor.next() {
                count += 1
                guard item.label.utf8.count == 200 else { exit(2) }
                if count % 1_000 == 1 { peak = max(peak, residentBytes()) }
            }
            guard count == 100_000 else { exit(2) }
            return peak - baseline
        }
    }

    /// The process's resident size in bytes (`/proc/self/statm`, second field, in pages).
    static func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { exit(3) }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { exit(3) }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}
