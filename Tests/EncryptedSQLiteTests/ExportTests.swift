import DiskModel
import TestSupport
import Foundation
import SecureKeys
import Testing

@_spi(Baseline) @testable import EncryptedSQLite

/// `Database.export(to:encryption:)`: a copy of one snapshot, in the clear or under the user's key, written to
/// a new file (0600) and never over one.
@Suite("Export")
struct ExportTests {
    let directory = TemporaryDirectory()
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }

    /// A store with `count` rows in `t(n, s)`.
    func store(rows count: Int = 200) throws -> Database {
        let database = try Database(path: directory.file("store.sqlite"), key: key)
        try database.execute("CREATE TABLE t(n INTEGER PRIMARY KEY, s TEXT NOT NULL); PRAGMA user_version = 7")
        try database.transaction {
            for n in 0..<count { try database.execute("INSERT INTO t VALUES (?, ?)", [.integer(Int64(n)), .text("secret value \(n)")]) }
        }
        return database
    }

    static func rows(of database: Database) throws -> [Int64] {
        try database.rows("SELECT n FROM t ORDER BY n").compactMap { $0[0].int64 }
    }

    static func mode(of path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
    }

    /// Runs `/usr/bin/sqlite3 path sql`: plain SQLite, nothing of this library.
    static func sqlite3(_ path: String, _ sql: String) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = [path, sql]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test("a plaintext export is a plain SQLite file (sqlite3 reads every row), mode 0600, with the user_version")
    func plaintextIsPlainSQLite() throws {
        let database = try store()
        let destination = directory.file("export.sqlite")
        try database.export(to: destination, encryption: .plaintext)
        #expect(try Self.mode(of: destination) == 0o600)
        let header = try #require(FileManager.default.contents(atPath: destination)).prefix(16)
        #expect(header == Data("SQLite format 3\0".utf8))
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3"), "sqlite3 (apt: sqlite3) reads the export")
        let count = try Self.sqlite3(destination, "SELECT count(*), max(s) FROM t; PRAGMA user_version;")
        #expect(count.status == 0, "\(count.output)")
        #expect(count.output == "200|secret value 99\n7\n")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".tmp-") }
        #expect(leftovers.isEmpty, "no temporary is left: \(leftovers)")
    }

    @Test("an export never replaces a file: already-exists, and the file there is unchanged")
    func neverOverwrites() throws {
        let database = try store()
        let destination = directory.file("taken.sqlite")
        try Data("someone's file".utf8).write(to: URL(fileURLWithPath: destination))
        for encryption in [ExportEncryption.plaintext, .key(key)] {
            let error = #expect(throws: StoreError.self) { try database.export(to: destination, encryption: encryption) }
            #expect(error?.code == .alreadyExists)
            #expect(error?.path == destination)
        }
        #expect(FileManager.default.contents(atPath: destination) == Data("someone's file".utf8))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains(".tmp-") }
        #expect(leftovers.isEmpty)
    }

    @Test("a key export opens with that key alone (format 1 settings), not with another, and is not plain SQLite")
    func keyExportOpensWithKey() throws {
        let database = try store()
        let userKey = try SecureBytes.random(count: 32)
        let destination = directory.file("export.sqlcipher")
        try database.export(to: destination, encryption: .key(userKey))
        #expect(try Self.mode(of: destination) == 0o600)
        let header = try #require(FileManager.default.contents(atPath: destination)).prefix(16)
        #expect(header != Data("SQLite format 3\0".utf8))
        let opened = try Database(openingUntrustedFileAt: destination, key: userKey)
        #expect(try Self.rows(of: opened) == Array(0..<200))
        #expect(try opened.integrityCheck() == ["ok"])
        opened.close()
        let wrong = #expect(throws: StoreError.self) { _ = try Database(openingUntrustedFileAt: destination, key: key) }
        #expect(wrong?.code == .wrongKey, "the store key does not open an export under the user's key")
    }

    @Test("a passphrase export opens with Argon2id(passphrase, the file's first 16 bytes, 3 passes, 64 MiB) as its raw key")
    func passphraseExportFollowsRecipe() throws {
        let database = try store()
        let destination = directory.file("export.passphrase")
        let passphrase = try SecureBytes(utf8: "correct horse battery staple")
        try database.export(to: destination, encryption: .passphrase(passphrase))
        // The documented recipe, spelled out here rather than taken from ExportPassphrase.
        let salt = Array(try #require(FileManager.default.contents(atPath: destination)).prefix(16))
        let recipe = PasscodeKDF(opsLimit: 3, memLimit: 67_108_864)
        let derived = try recipe.deriveKey(from: passphrase, salt: salt)
        defer { derived.wipe() }
        let opened = try Database(openingUntrustedFileAt: destination, key: derived)
        #expect(try Self.rows(of: opened) == Array(0..<200))
        opened.close()
        let viaLibrary = try ExportPassphrase.key(forExportAt: destination, passphrase: passphrase)
        #expect(viaLibrary.constantTimeEquals(derived))
        let empty = #expect(throws: StoreError.self) {
            try database.export(to: self.directory.file("empty"), encryption: .passphrase(try SecureBytes(count: 0)))
        }
        #expect(empty?.code == .invalidArgument)
        let other = try ExportPassphrase.key(forExportAt: destination, passphrase: try SecureBytes(utf8: "wrong"))
        #expect(throws: StoreError.self) { _ = try Database(openingUntrustedFileAt: destination, key: other) }
    }

    @Test("an export holds what was committed when it began, not another connection's open transaction, and that writer goes on")
    func exportIsOneSnapshot() throws {
        let database = try store(rows: 10)
        let writer = try Database(path: directory.file("store.sqlite"), key: key)
        try writer.execute("BEGIN IMMEDIATE; INSERT INTO t VALUES (1000, 'uncommitted')")
        let destination = directory.file("snapshot.sqlite")
        try database.export(to: destination, encryption: .key(key))
        try writer.execute("COMMIT")
        let opened = try Database(openingUntrustedFileAt: destination, key: key)
        #expect(try Self.rows(of: opened) == Array(0..<10))
        #expect(try Self.rows(of: database) == Array(0..<10) + [1000], "the writer's commit went through")
    }

    @Test("a read-only connection, or one inside a transaction, refuses to export with misuse and writes nothing")
    func refusesWithoutWritableConnection() throws {
        let database = try store(rows: 1)
        var readOnly = Database.Configuration()
        readOnly.readOnly = true
        let reader = try Database(path: directory.file("store.sqlite"), key: key, configuration: readOnly)
        let destination = directory.file("never.sqlite")
        let error = #expect(throws: StoreError.self) { try reader.export(to: destination, encryption: .plaintext) }
        #expect(error?.code == .misuse)
        try database.transaction {
            let inside = #expect(throws: StoreError.self) { try database.export(to: destination, encryption: .plaintext) }
            #expect(inside?.code == .misuse)
        }
        #expect(!FileManager.default.fileExists(atPath: destination))
    }
}

/// A power cut before each file-system call of an export — the copy's writes and syncs, the link, the
/// temporary's removal, the folder's sync — leaves no file at the destination, or the whole copy; the store
/// itself is never harmed.
@Suite("Export under power cuts", .serialized)
struct ExportPowerCutTests {
    static let cases: [(ExportEncryption, DiskFaultSweep.Kind)] =
        [(ExportEncryption.plaintext, .powerCut(.drop, seed: 3)), (.key(try! SecureBytes.random(count: 32)), .powerCut(.drop, seed: 3))]
        + SimulatedDisk.PowerCutMode.allCases.filter { $0 != .drop }.map { (.plaintext, .powerCut($0, seed: 5)) }
        + DiskFaultSweep.Kind.errors.map { (.key(try! SecureBytes.random(count: 32)), $0) }

    @Test("a fault or a cut at every step of an export: no destination or a whole one, and the store keeps every row", arguments: cases)
    func cutAtEveryStep(encryption: ExportEncryption, kind: DiskFaultSweep.Kind) async throws {
        let key = try SecureBytes.random(count: 32)
        var outcomes: [String: Int] = [:]
        var problems: [String] = []
        let report = try await DiskFaultSweep.run(kind) { () async throws -> (fileSystem: FileSystem, root: String, fixture: ExportCutFixture) in
            let fixture = ExportCutFixture()
            let database = try Database(path: fixture.store, key: key, configuration: fixture.configuration)
            try database.execute("CREATE TABLE t(n INTEGER PRIMARY KEY, s TEXT)")
            try database.transaction {
                for n in 0..<300 { try database.execute("INSERT INTO t VALUES (?, ?)", [.integer(Int64(n)), .text(String(repeating: "v", count: 50))]) }
            }
            try DiskIO.syncDirectory(fixture.directory.path, in: fixture.fileSystem)
            fixture.database = database
            return (fixture.fileSystem, fixture.directory.path, fixture)
        } operation: { (fixture: ExportCutFixture) in
            try fixture.database!.export(to: fixture.destination, encryption: encryption)
        } check: { (fixture: ExportCutFixture, round: DiskFaultSweep.Round) in
            fixture.database?.close()
            fixture.database = nil
            let label = "call \(round.failingCall) \(round.plan.failures.first.map { "\($0)" } ?? "(no fault)")"
            if !round.faultFired, round.error != nil { problems.append("\(label): failed with no fault: \(round.error!)") }
            if round.faultFired, round.error == nil, case .powerCut = kind.fault { problems.append("\(label): succeeded although the power was cut") }
            if let error = round.error, !(error is StoreError) { problems.append("\(label): untyped \(error)") }
            if FileManager.default.fileExists(atPath: fixture.destination) {
                let opened: Database
                switch encryption {
                case .key(let exportKey): opened = try Database(openingUntrustedFileAt: fixture.destination, key: exportKey)
                default: opened = try Database(unencryptedPath: fixture.destination)
                }
                let count = try opened.scalar("SELECT count(*) FROM t")?.int64
                if count != 300 { problems.append("\(label): the destination holds \(count ?? -1) rows") }
                if try opened.integrityCheck() != ["ok"] { problems.append("\(label): the destination fails integrity_check") }
                opened.close()
                outcomes["whole", default: 0] += 1
            } else {
                outcomes["none", default: 0] += 1
                if round.error == nil { problems.append("\(label): said done, and nothing is there") }
            }
            let store = try Database(path: fixture.store, key: key, configuration: fixture.configuration)
            if try store.scalar("SELECT count(*) FROM t")?.int64 != 300 { problems.append("\(label): the store lost rows") }
            store.close()
        }
        print("export sweep (\(encryption.name), \(kind)): \(report), outcomes \(outcomes)")
        #expect(report.faultPoints >= 8, "the sweep reached the copy's calls and the link")
        #expect(outcomes["whole", default: 0] >= 1 && outcomes["none", default: 0] >= 1, "both outcomes occur: \(outcomes)")
        for problem in problems { Issue.record("\(problem)") }
    }
}

/// One round's store, under a simulated disk.
final class ExportCutFixture {
    let directory = TemporaryDirectory()
    let disk: SimulatedDisk
    var database: Database?
    init() { disk = SimulatedDisk(root: directory.path) }
    deinit { disk.stopModelling() }
    /// The disk's file system, where the sweep arms its plans.
    var fileSystem: FileSystem { .simulated(disk) }
    /// A connection's configuration on the disk.
    var configuration: Database.Configuration {
        var configuration = Database.Configuration()
        configuration.fileSystem = fileSystem
        return configuration
    }
    var store: String { directory.file("store.sqlite") }
    var destination: String { directory.file("export.sqlite") }
}
