import TestSupport
import SecureKeys
import Testing

@testable import EncryptedSQLite

/// `inSavepoint` undoes only its own changes when its body throws, nests, and stands alone as a transaction.
@Suite("Savepoints")
struct SavepointTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }

    enum AppError: Error, Equatable {
        case rejected(String)
    }

    func makeDatabase() throws -> Database {
        let database = try Database(path: directory.file("store.sqlite"), key: key)
        try database.execute("CREATE TABLE items(name TEXT NOT NULL)")
        return database
    }

    func names(_ database: Database) throws -> [String] {
        try database.fetchValues(String.self, "SELECT name FROM items ORDER BY rowid")
    }

    func insert(_ name: String, into database: Database) throws {
        try database.execute("INSERT INTO items(name) VALUES (?)", [name])
    }

    @Test("once SQLite has rolled a transaction back on its own, a further statement of its body is refused, and nothing of the body commits")
    func abortedTransactionRefusesStatements() throws {
        let database = try makeDatabase()
        let error = #expect(throws: StoreError.self) {
            try database.transaction {
                try insert("first", into: database)
                try database.execute("ROLLBACK")  // what SQLite does by itself after a full disk or an I/O error
                try insert("second", into: database)  // would autocommit, outside any transaction
            }
        }
        #expect(error?.code == .misuse)
        #expect(try names(database) == [])
        // The connection is usable again once the body has ended.
        try database.transaction { try insert("after", into: database) }
        #expect(try names(database) == ["after"])
    }

    @Test("a savepoint whose body throws undoes only its own changes; the enclosing transaction commits the rest")
    func failedSavepointRollsBackOnlyItself() throws {
        let database = try makeDatabase()
        try database.transaction {
            try insert("before", into: database)
            #expect(throws: AppError.rejected("inner")) {
                try database.inSavepoint {
                    try insert("inner", into: database)
                    throw AppError.rejected("inner")
                }
            }
            #expect(database.isInTransaction, "the enclosing transaction is still open")
            try insert("after", into: database)
        }
        #expect(try names(database) == ["before", "after"])
    }

    @Test("nested savepoints: an inner failure undoes the inner one only, an outer failure undoes both")
    func nestedSavepoints() throws {
        let database = try makeDatabase()
        try database.transaction {
            let value = try database.inSavepoint {
                try insert("outer", into: database)
                try? database.inSavepoint {
                    try insert("inner, undone", into: database)
                    throw AppError.rejected("inner")
                }
                try database.inSavepoint { try insert("inner, kept", into: database) }
                return 42
            }
            #expect(value == 42)
            #expect(throws: AppError.rejected("outer")) {
                try database.inSavepoint {
                    try insert("second outer", into: database)
                    try database.inSavepoint { try insert("its inner", into: database) }
                    throw AppError.rejected("outer")
                }
            }
        }
        #expect(try names(database) == ["outer", "inner, kept"])
    }

    @Test("outside a transaction a savepoint is one: committed when its body returns, rolled back when it throws")
    func savepointOutsideATransaction() throws {
        let database = try makeDatabase()
        try database.inSavepoint { try insert("committed", into: database) }
        #expect(!database.isInTransaction)
        #expect(throws: AppError.rejected("alone")) {
            try database.inSavepoint {
                #expect(database.isInTransaction)
                try insert("rolled back", into: database)
                throw AppError.rejected("alone")
            }
        }
        #expect(!database.isInTransaction)
        // Seen by another connection: it was committed, not left in an open transaction.
        let other = try Database(path: directory.file("store.sqlite"), key: key)
        #expect(try names(other) == ["committed"])
    }

    @Test("the body's error reaches the caller unchanged, of its own type, after its changes were undone")
    func bodyErrorIsUnchanged() throws {
        let database = try makeDatabase()
        var caught: (any Error)?
        try database.transaction {
            try insert("kept", into: database)
            do {
                try database.inSavepoint { () throws -> Void in
                    try insert("undone", into: database)
                    throw AppError.rejected("typed")
                }
            } catch {
                caught = error
            }
        }
        #expect(caught as? AppError == .rejected("typed"), "got \(String(describing: caught))")
        // An SQLite error from the body comes out as it was too, code and extended code.
        var constraint: (any Error)?
        try database.transaction {
            try database.execute("CREATE UNIQUE INDEX names ON items(name)")
            do {
                try database.inSavepoint { try insert("kept", into: database) }
            } catch {
                constraint = error
            }
        }
        let error = try #require(constraint as? StoreError)
        #expect(error.code == .constraint && error.extendedResultCode == 2067)  // SQLITE_CONSTRAINT_UNIQUE
        #expect(try names(database) == ["kept"])
    }

    @Test("a transaction inside a transaction fails with misuse naming inSavepoint, and the outer one is unharmed")
    func nestedTransactionFailsClearly() throws {
        let database = try makeDatabase()
        try database.transaction {
            try insert("outer", into: database)
            #expect {
                try database.transaction { try insert("nested", into: database) }
            } throws: { error in
                let error = error as? StoreError
                return error?.code == .misuse && error?.message.contains("inSavepoint") == true
            }
        }
        #expect(try names(database) == ["outer"])
    }
}
