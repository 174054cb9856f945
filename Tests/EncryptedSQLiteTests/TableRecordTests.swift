import Foundation
import SecureKeys
import TestSupport
import Testing

@testable import EncryptedSQLite

/// A record with a text key, as in GRDB's README.
private struct Player: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: String
    var name: String
    var score: Int
    var nickname: String?
}

/// A record keyed by SQLite's rowid: the key is `nil` until the insert.
private struct Visit: Codable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "visits"
    static let databasePrimaryKey = "number"
    var number: Int64?
    var place: String
}

/// A record keyed by SQLite's rowid that keeps the key SQLite chose (`didInsert(rowID:)`), as GRDB's records do.
private struct Ticket: Codable, Equatable, FetchableRecord, PersistableRecord {
    var id: Int64?
    var seat: String
    mutating func didInsert(rowID: Int64) { id = rowID }
}

/// Records of a table (issue 27, item 9): a table name and a primary key on the type, and the methods GRDB
/// users reach for on day one.
@Suite("Table records")
struct TableRecordTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }

    func open() throws -> Database {
        let database = try Database(path: directory.file("store.sqlite"), key: key)
        try database.execute(
            """
            CREATE TABLE player(id TEXT PRIMARY KEY NOT NULL, name TEXT NOT NULL, score INTEGER NOT NULL, nickname TEXT);
            CREATE TABLE visits(number INTEGER PRIMARY KEY, place TEXT NOT NULL);
            CREATE TABLE ticket(id INTEGER PRIMARY KEY, seat TEXT NOT NULL UNIQUE);
            """)
        return database
    }

    func names(_ database: Database) throws -> [String] {
        try database.fetchValues(String.self, "SELECT name FROM player ORDER BY id")
    }

    @Test("the default table name is the type's name with its leading capitals lowercased, as GRDB's")
    func defaultTableName() {
        #expect(Player.databaseTableName == "player")
        #expect(Player.databasePrimaryKey == "id")
        #expect(Visit.databaseTableName == "visits")
        #expect(EncryptedSQLite.defaultTableName(for: "HTTPRequest") == "httpRequest")
        #expect(EncryptedSQLite.defaultTableName(for: "URL") == "url")
        #expect(EncryptedSQLite.defaultTableName(for: "player") == "player")
    }

    @Test("insert writes every stored property as a column, and a duplicate key fails with constraint")
    func insertWritesARow() throws {
        let database = try open()
        try Player(id: "1", name: "Arthur", score: 100).insert(database)
        #expect(try database.rows("SELECT id, name, score, nickname FROM player").map { $0.values } == [
            [.text("1"), .text("Arthur"), .integer(100), .null]
        ])
        let duplicate = #expect(throws: StoreError.self) { try Player(id: "1", name: "Barbara", score: 1).insert(database) }
        #expect(duplicate?.code == .constraint)
        try Player(id: "1", name: "Barbara", score: 1).insert(database, onConflict: .replace)
        #expect(try names(database) == ["Barbara"])
    }

    @Test("insert returns the rowid SQLite gave a record whose integer key was nil")
    func insertReturnsTheRowID() throws {
        let database = try open()
        let first = try Visit(number: nil, place: "café").insert(database)
        let second = try Visit(number: nil, place: "park").insert(database)
        #expect(second == first + 1)
        #expect(try Visit.fetchOne(database, key: second) == Visit(number: second, place: "park"))
    }

    @Test("update sets every other column of the row with the record's key, and fails with record-not-found when none has it")
    func updateChangesTheRowWithTheKey() throws {
        let database = try open()
        try Player(id: "1", name: "Arthur", score: 100, nickname: "Art").insert(database)
        try Player(id: "2", name: "Barbara", score: 1000).insert(database)
        try Player(id: "1", name: "Arthur", score: 150).update(database)
        #expect(try Player.fetchOne(database, key: "1") == Player(id: "1", name: "Arthur", score: 150, nickname: nil))
        #expect(try Player.fetchOne(database, key: "2") == Player(id: "2", name: "Barbara", score: 1000))

        let missing = #expect(throws: StoreError.self) { try Player(id: "3", name: "Craig", score: 5).update(database) }
        #expect(missing?.code == .recordNotFound)
        #expect(missing.map { "\($0)" }?.hasPrefix("record-not-found: ") == true)
        #expect(missing?.message.contains("nothing to update") == true)
        #expect(try Player.fetchCount(database) == 2)
    }

    @Test("inserted gives back the record with the key SQLite chose, through didInsert(rowID:)")
    func insertedHasItsKey() throws {
        let database = try open()
        let first = try Ticket(id: nil, seat: "1A").inserted(database)
        let second = try Ticket(id: nil, seat: "1B").inserted(database)
        #expect(first.id != nil && second.id == first.id.map { $0 + 1 })
        #expect(try Ticket.fetchOne(database, key: second.id ?? -1) == second)
        // Skipped on a conflict: nothing was inserted, and the record comes back without a key.
        let skipped = try Ticket(id: nil, seat: "1A").inserted(database, onConflict: .ignore)
        #expect(skipped.id == nil)
        // A record without the hook comes back as it was, and its row is written.
        #expect(try Visit(number: nil, place: "park").inserted(database) == Visit(number: nil, place: "park"))
        #expect(try Visit.fetchCount(database) == 1)
    }

    @Test("deleteOne deletes the row with a key, and says whether there was one")
    func deleteOneByKey() throws {
        let database = try open()
        try Player(id: "1", name: "Arthur", score: 100).insert(database)
        try Player(id: "2", name: "Barbara", score: 1000).insert(database)
        #expect(try Player.deleteOne(database, key: "1"))
        #expect(try Player.deleteOne(database, key: "1") == false)
        #expect(try names(database) == ["Barbara"])
    }

    @Test("save inserts a record whose key no row has, then updates that row")
    func saveInsertsThenUpdates() throws {
        let database = try open()
        var player = Player(id: "1", name: "Arthur", score: 100)
        try player.save(database)
        #expect(try Player.fetchAll(database) == [player])
        player.score = 200
        try player.save(database)
        #expect(try Player.fetchAll(database) == [player])
        // A nil rowid key: inserted, SQLite picks the key.
        try Visit(number: nil, place: "café").save(database)
        try Visit(number: nil, place: "café").save(database)
        #expect(try Visit.fetchCount(database) == 2)
    }

    @Test("save updates in place instead of replacing, so a row that other rows point at is not deleted")
    func saveDoesNotReplace() throws {
        let database = try open()
        try database.execute("CREATE TABLE score(player TEXT NOT NULL REFERENCES player(id) ON DELETE CASCADE)")
        try Player(id: "1", name: "Arthur", score: 100).insert(database)
        try database.execute("INSERT INTO score(player) VALUES ('1')")
        try Player(id: "1", name: "Arthur", score: 200).save(database)
        #expect(try database.fetchValue(Int.self, "SELECT count(*) FROM score") == 1)
    }

    @Test("exists says whether a row has the record's key, whatever its other columns")
    func existsLooksAtTheKey() throws {
        let database = try open()
        let player = Player(id: "1", name: "Arthur", score: 100)
        #expect(try player.exists(database) == false)
        try player.insert(database)
        #expect(try player.exists(database))
        #expect(try Player(id: "1", name: "Someone else", score: 0).exists(database))
        #expect(try Player(id: "2", name: "Arthur", score: 100).exists(database) == false)
        #expect(try Visit(number: nil, place: "nowhere").exists(database) == false)
    }

    @Test("delete removes the row with the record's key and returns whether a row was deleted")
    func deleteReturnsWhetherARowWent() throws {
        let database = try open()
        let arthur = Player(id: "1", name: "Arthur", score: 100)
        try arthur.insert(database)
        try Player(id: "2", name: "Barbara", score: 1000).insert(database)
        #expect(try arthur.delete(database))
        #expect(try names(database) == ["Barbara"])
        #expect(try arthur.delete(database) == false)
        #expect(try names(database) == ["Barbara"])
    }

    @Test("fetchOne(key:) returns the row with that key, and nil for a key no row has")
    func fetchOneByKey() throws {
        let database = try open()
        try Player(id: "1", name: "Arthur", score: 100).insert(database)
        #expect(try Player.fetchOne(database, key: "1") == Player(id: "1", name: "Arthur", score: 100))
        #expect(try Player.fetchOne(database, key: "missing") == nil)
        #expect(try Visit.fetchOne(database, key: 42) == nil)
    }

    @Test("fetchAll decodes every row of the table, fetchCount counts them")
    func fetchAllAndCount() throws {
        let database = try open()
        #expect(try Player.fetchAll(database).isEmpty)
        #expect(try Player.fetchCount(database) == 0)
        let players = (1...5).map { Player(id: "\($0)", name: "p\($0)", score: $0 * 10) }
        for player in players { try player.insert(database) }
        #expect(try Player.fetchAll(database).sorted { $0.id < $1.id } == players)
        #expect(try Player.fetchCount(database) == 5)
        #expect(try Visit.fetchCount(database) == 0)
    }

    @Test("deleteAll empties the table and returns how many rows went; other tables keep theirs")
    func deleteAllEmptiesTheTable() throws {
        let database = try open()
        for index in 1...3 { try Player(id: "\(index)", name: "p", score: index).insert(database) }
        try Visit(number: nil, place: "café").insert(database)
        #expect(try Player.deleteAll(database) == 3)
        #expect(try Player.fetchCount(database) == 0)
        #expect(try Visit.fetchCount(database) == 1)
        #expect(try Player.deleteAll(database) == 0)
    }

    @Test("a record without a property for its primary key fails with misuse naming the key")
    func missingKeyProperty() throws {
        struct Nameless: Codable, FetchableRecord, PersistableRecord {
            static let databaseTableName = "player"
            var name: String
        }
        let database = try open()
        let error = #expect(throws: StoreError.self) { try Nameless(name: "x").delete(database) }
        #expect(error?.code == .misuse)
        #expect(error?.message.contains("`id`") == true)
    }

    @Test("records decode as fetchAll(_:_:_:) decodes: a row that does not decode fails with misuse naming the column")
    func decodingKeepsTheCodableSemantics() throws {
        let database = try open()
        try database.execute("INSERT INTO player(id, name, score) VALUES ('1', 'Arthur', 'not a number')")
        let error = #expect(throws: StoreError.self) { try Player.fetchAll(database) }
        #expect(error?.code == .misuse)
        #expect(error?.message.contains("column `score`") == true)
    }
}
