import TestSupport
import Foundation
import SecureKeys
import Testing

@testable import EncryptedSQLite

/// A record with every kind of column the encoder and decoder handle.
private struct Note: Codable, Equatable, Sendable {
    var id: UUID
    var title: String
    var body: Data
    var pinned: Bool
    var rank: Int
    var score: Double
    var createdAt: Date
    var archivedAt: Date?
    var tags: [String]
}

@Suite("Records and statements")
struct RecordTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }

    func open() throws -> Database {
        let database = try Database(path: directory.file("store.sqlite"), key: key)
        try database.execute(
            """
            CREATE TABLE IF NOT EXISTS notes(
                id BLOB PRIMARY KEY NOT NULL, title TEXT NOT NULL, body BLOB NOT NULL, pinned INTEGER NOT NULL,
                rank INTEGER NOT NULL, score REAL NOT NULL, createdAt TEXT NOT NULL, archivedAt TEXT,
                tags TEXT NOT NULL)
            """)
        return database
    }

    func misuseMessage(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as StoreError where error.code == .misuse {
            return error.message
        } catch {
            Issue.record("expected misuse, got \(error)")
            return nil
        }
    }

    @Test("a Codable record with UUID, Data, Bool, Int, Double, Date, nil and an array round-trips through a row")
    func codableRoundTrip() throws {
        let database = try open()
        let created = Date(timeIntervalSince1970: 1_700_000_000.125)
        let notes = [
            Note(
                id: UUID(), title: "groceries", body: Data([0, 1, 2, 255]), pinned: true, rank: -3, score: 0.5,
                createdAt: created, archivedAt: nil, tags: ["home", "list"]),
            Note(
                id: UUID(), title: "", body: Data(), pinned: false, rank: Int.max, score: -1e300,
                createdAt: created.addingTimeInterval(60.5), archivedAt: created.addingTimeInterval(120), tags: []),
        ]
        for note in notes { try database.insert(note, into: "notes") }
        let read = try database.fetchAll(Note.self, "SELECT * FROM notes ORDER BY createdAt")
        #expect(read == notes)
        #expect(try database.fetchOne(Note.self, "SELECT * FROM notes WHERE id = ?", [notes[1].id]) == notes[1])
        #expect(try database.fetchOne(Note.self, "SELECT * FROM notes WHERE id = ?", [UUID()]) == nil)
        // Stored the documented way: the date as SQLite's text, the UUID as 16 bytes, the array as JSON.
        let row = try #require(try database.rows("SELECT createdAt, id, tags, archivedAt FROM notes ORDER BY createdAt").first)
        #expect(row[0] == .text("2023-11-14 22:13:20.125"))
        #expect(row[1].blob?.count == 16)
        #expect(row[2] == .text(#"["home","list"]"#))
        #expect(row[3] == .null)
    }

    @Test("an empty string and an empty blob are stored as such, not as NULL")
    func emptyValuesAreNotNull() throws {
        let database = try open()
        try database.execute("CREATE TABLE t(a, b)")
        try database.execute("INSERT INTO t(a, b) VALUES (?, ?)", ["", [UInt8]()])
        #expect(try database.rows("SELECT typeof(a), typeof(b) FROM t").first?.values == [.text("text"), .text("blob")])
    }

    @Test("named arguments bind by name, with or without the prefix; a missing or extra name is a clear misuse")
    func namedArguments() throws {
        let database = try open()
        try database.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)")
        try database.execute("INSERT INTO t(id, name) VALUES (:id, :name)", ["id": 7, ":name": "seven"])
        #expect(try database.fetchValue(String.self, "SELECT name FROM t WHERE id = $id", ["id": 7]) == "seven")
        let missing = misuseMessage { try database.execute("INSERT INTO t(id, name) VALUES (:id, :name)", ["id": 8]) }
        #expect(missing?.contains(":name") == true)
        let extra = misuseMessage {
            try database.execute("INSERT INTO t(id, name) VALUES (:id, :name)", ["id": 8, "name": "x", "nmae": "y"])
        }
        #expect(extra?.contains("nmae") == true)
        let count = misuseMessage { try database.execute("INSERT INTO t(id, name) VALUES (?, ?)", [9]) }
        #expect(count?.contains("takes 2 arguments, got 1") == true)
        #expect(try database.fetchValue(Int.self, "SELECT count(*) FROM t") == 1, "no failed statement wrote a row")
    }

    @Test("a record's properties become named arguments, nil ones included")
    func recordAsNamedArguments() throws {
        let database = try open()
        var note = Note(
            id: UUID(), title: "draft", body: Data("x".utf8), pinned: false, rank: 1, score: 1, createdAt: Date(),
            archivedAt: Date(), tags: ["a"])
        try database.insert(note, into: "notes")
        note.title = "final"
        note.archivedAt = nil
        try database.execute(
            "UPDATE notes SET title = :title, archivedAt = :archivedAt WHERE id = :id",
            StatementArguments(named: ["title": note.title, "archivedAt": note.archivedAt as Date?, "id": note.id]))
        #expect(try database.fetchOne(Note.self, "SELECT * FROM notes")?.title == "final")
        #expect(try database.fetchValue(Date?.self, "SELECT archivedAt FROM notes") == .some(nil))
        let arguments = try StatementArguments(encoding: note)
        #expect(arguments.namedValues["archivedAt"] == .null)
        #expect(arguments.namedValues.count == 9)
    }

    @Test("lastInsertedRowID and changes report the last insert and update")
    func rowIDAndChanges() throws {
        let database = try open()
        try database.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)")
        try database.execute("INSERT INTO t(name) VALUES (?)", ["a"])
        try database.execute("INSERT INTO t(name) VALUES (?)", ["b"])
        #expect(database.lastInsertedRowID == 2)
        try database.execute("UPDATE t SET name = 'c'")
        #expect(database.changes == 2)
        struct Item: Codable { var name: String }
        #expect(try database.insert(Item(name: "d"), into: "t") == 3)
    }

    @Test("insert with a conflict policy: abort fails with constraint, replace replaces, ignore keeps")
    func conflictPolicies() throws {
        let database = try open()
        try database.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT)")
        struct Item: Codable, Equatable { var id: Int; var name: String }
        try database.insert(Item(id: 1, name: "a"), into: "t")
        #expect(throws: StoreError.self) { try database.insert(Item(id: 1, name: "b"), into: "t") }
        try database.insert(Item(id: 1, name: "c"), into: "t", onConflict: .ignore)
        #expect(try database.fetchAll(Item.self, "SELECT * FROM t") == [Item(id: 1, name: "a")])
        try database.insert(Item(id: 1, name: "d"), into: "t", onConflict: .replace)
        #expect(try database.fetchAll(Item.self, "SELECT * FROM t") == [Item(id: 1, name: "d")])
    }

    @Test("a row that does not decode names the column and the types, never the value")
    func decodingErrorsNameTheColumn() throws {
        let database = try open()
        try database.execute("CREATE TABLE t(id INTEGER, name TEXT)")
        try database.execute("INSERT INTO t VALUES (1, NULL)")
        struct Item: Codable { var id: Int; var name: String }
        let null = misuseMessage { _ = try database.fetchAll(Item.self, "SELECT * FROM t") }
        #expect(null?.contains("column `name` holds NULL") == true)
        struct Other: Codable { var id: Int; var missing: String }
        let missing = misuseMessage { _ = try database.fetchAll(Other.self, "SELECT * FROM t") }
        #expect(missing?.contains("no column `missing`") == true)
        try database.execute("INSERT INTO t VALUES ('secret-text', 'x')")
        let mismatch = misuseMessage { _ = try database.fetchValues(Int.self, "SELECT id FROM t") }
        #expect(mismatch?.contains("TEXT") == true)
        #expect(mismatch?.contains("secret-text") == false)
    }

    @Test("column values: Bool, big unsigned integers, Date text forms and UUID text convert as documented")
    func valueConversions() {
        #expect(true.databaseValue == .integer(1))
        #expect(Bool.fromDatabaseValue(.integer(2)) == true)
        #expect(UInt64.max.databaseValue == .real(Double(UInt64.max)))
        #expect(Int8.fromDatabaseValue(.integer(300)) == nil, "an integer that does not fit is not truncated")
        #expect(Int.fromDatabaseValue(.real(2.5)) == nil)
        #expect(String.fromDatabaseValue(.integer(1)) == nil)
        let date = Date(timeIntervalSince1970: 86_400 * 365.25 * 30 + 0.25)
        #expect(Date.fromDatabaseValue(date.databaseValue) == date)
        #expect(Date.fromDatabaseValue(.text("2024-02-29T12:30:00")) == Date(timeIntervalSince1970: 1_709_209_800))
        #expect(Date.fromDatabaseValue(.text("2024-02-29")) == Date(timeIntervalSince1970: 1_709_164_800))
        #expect(Date.fromDatabaseValue(.text("2023-02-29")) == nil, "no February 29 in 2023")
        #expect(Date.fromDatabaseValue(.integer(0)) == Date(timeIntervalSince1970: 0))
        let uuid = UUID()
        #expect(UUID.fromDatabaseValue(uuid.databaseValue) == uuid)
        #expect(UUID.fromDatabaseValue(.text(uuid.uuidString)) == uuid)
        #expect(Optional<Int>.fromDatabaseValue(.null) == .some(nil))
    }

    @Test("a prepared statement is one statement: SQL with a second one is refused, not half-run")
    func oneStatementPerPrepare() throws {
        let database = try open()
        try database.execute("CREATE TABLE t(id INTEGER)")
        #expect(throws: StoreError.self) { try database.execute("INSERT INTO t VALUES (?); DROP TABLE t", [1]) }
        #expect(try database.fetchValue(Int.self, "SELECT count(*) FROM t;  -- trailing comment") == 0)
    }

    @Test("the authorizer names the tables a read looks at and the tables a committed transaction wrote")
    func tableTracking() throws {
        let database = try open()
        try database.execute("CREATE TABLE a(x); CREATE TABLE b(y)")
        _ = database.takeCommittedWrites()
        let (_, read) = try database.trackingReads { try database.rows("SELECT x FROM a") }
        #expect(read == TableRegion(tables: ["a"]))
        try database.transaction { try database.execute("INSERT INTO b(y) VALUES (?)", [1]) }
        #expect(database.takeCommittedWrites() == TableRegion(tables: ["b"]))
        try? database.transaction {
            try database.execute("INSERT INTO a(x) VALUES (?)", [1])
            throw CancellationError()
        }
        #expect(database.takeCommittedWrites().isEmpty, "a rolled-back transaction wrote nothing")
        try database.execute("DELETE FROM a")
        #expect(database.takeCommittedWrites() == TableRegion(tables: ["a"]), "a DELETE without WHERE counts too")
    }

    @Test("typed accessors read a column in one or two calls: text or nil for NULL, integers and reals as SQLite converts them")
    func typedAccessors() throws {
        let database = try open()
        try database.execute("CREATE TABLE t(a, b, c)")
        try database.execute("INSERT INTO t VALUES (?, ?, ?)", ["text", 42, 2.5])
        try database.execute("INSERT INTO t VALUES (?, ?, ?)", [nil, "7", nil])
        let statement = try database.prepare("SELECT a, b, c FROM t ORDER BY rowid")
        try statement.bind([DatabaseValue]())
        #expect(try statement.step())
        #expect(statement.string(at: 0) == "text")
        #expect(statement.int64(at: 1) == 42)
        #expect(statement.double(at: 2) == 2.5)
        #expect(statement.string(at: 1) == "42")
        #expect(try statement.step())
        #expect(statement.string(at: 0) == nil)
        #expect(statement.int64(at: 1) == 7)
        #expect(statement.double(at: 2) == 0)
        #expect(try !statement.step())
    }
}
