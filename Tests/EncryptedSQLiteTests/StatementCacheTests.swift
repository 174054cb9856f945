import TestSupport
import SecureKeys
import Testing

@testable import EncryptedSQLite

/// The per-connection cache of prepared statements is bounded: least recently used out, never under a user.
@Suite("Statement cache")
struct StatementCacheTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }

    func makeDatabase(capacity: Int? = nil) throws -> Database {
        var configuration = Database.Configuration()
        if let capacity { configuration.statementCacheCapacity = capacity }
        let database = try Database(path: directory.file("store.sqlite"), key: key, configuration: configuration)
        try database.execute("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        try database.execute("INSERT INTO items(id, name) VALUES (1, 'one'), (2, 'two'), (3, 'three')")
        return database
    }

    /// A distinct SQL text per `index`, with a result that depends on it.
    func distinctQuery(_ index: Int) -> String { "SELECT count(*) + \(index) FROM items WHERE id <= ?" }

    @Test("after many more distinct statements than its capacity, the cache holds exactly its capacity, the least recently used evicted, results correct")
    func cacheIsBoundedAndEvictsTheLeastRecentlyUsed() throws {
        let capacity = 8
        let database = try makeDatabase(capacity: capacity)
        let kept = "SELECT name FROM items WHERE id = ?"
        #expect(try database.fetchValues(String.self, kept, [2]) == ["two"])
        var largest = 0
        for index in 0..<500 {
            #expect(try database.fetchValues(Int.self, distinctQuery(index), [2]) == [2 + index])
            // Used on every round, so it is never the least recently used.
            if index.isMultiple(of: 3) { #expect(try database.fetchValues(String.self, kept, [3]) == ["three"]) }
            largest = max(largest, database.cachedStatementCount)
        }
        #expect(largest == capacity, "never more than its capacity")
        #expect(database.cachedStatementCount == capacity)
        #expect(database.cachesStatement(kept), "used recently, so kept")
        #expect(database.cachesStatement(distinctQuery(499)))
        #expect(!database.cachesStatement(distinctQuery(0)), "the least recently used was evicted")
        // The cache holds the `capacity` most recently used texts: `kept` and the last capacity − 1 queries.
        #expect(database.cachesStatement(distinctQuery(500 - (capacity - 1))))
        #expect(!database.cachesStatement(distinctQuery(500 - capacity)))
        // An evicted statement is prepared again, correctly.
        #expect(try database.fetchValues(Int.self, distinctQuery(0), [3]) == [3])
        #expect(database.cachedStatementCount == capacity)
    }

    @Test("the default capacity is 100")
    func defaultCapacity() throws {
        let database = try makeDatabase()
        for index in 0..<1_000 { _ = try database.fetchValues(Int.self, distinctQuery(index), [1]) }
        #expect(Database.Configuration().statementCacheCapacity == 100)
        #expect(database.cachedStatementCount == 100)
    }

    @Test("capacity 0 keeps no statement, and queries still work")
    func zeroCapacityDisablesCaching() throws {
        let database = try makeDatabase(capacity: 0)
        for _ in 0..<3 {
            #expect(try database.fetchValues(String.self, "SELECT name FROM items WHERE id = ?", [2]) == ["two"])
            try database.transaction { try database.execute("UPDATE items SET name = ? WHERE id = ?", ["uno", 1]) }
        }
        #expect(database.cachedStatementCount == 0)
        #expect(try database.fetchValues(String.self, "SELECT name FROM items WHERE id = 1") == ["uno"])
    }

    @Test("a cached statement being stepped stays valid when the cache evicts it")
    func evictionDoesNotFinalizeAStatementInUse() throws {
        let database = try makeDatabase(capacity: 2)
        let statement = try database.cachedStatement("SELECT name FROM items ORDER BY id")
        #expect(try statement.step())
        #expect(statement.string(at: 0) == "one")
        for index in 0..<10 { _ = try database.fetchValues(Int.self, distinctQuery(index), [1]) }
        #expect(!database.cachesStatement("SELECT name FROM items ORDER BY id"), "evicted while in use")
        #expect(try statement.step())
        #expect(statement.string(at: 0) == "two")
        #expect(try statement.step())
        #expect(statement.string(at: 0) == "three")
        #expect(try !statement.step())
        statement.reset()
    }
}
