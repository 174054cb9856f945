import DiskModel
import TestSupport
import Foundation
import SecureKeys
import Testing

@testable import EncryptedSQLite

/// SQLCipher's store under the simulated disk (through the protected-store-disk VFS): what a power cut keeps.
@Suite("Power cuts under SQLite")
struct PowerCutTests {
    let key: SecureBytes

    init() throws {
        key = try SecureBytes.random(count: 32)
    }

    /// What one cut left: the rows a new connection finds, its `integrity_check`, and what a write through the
    /// connection opened before the cut threw (`nil` if it succeeded).
    struct AfterCut {
        let rows: [Int64]
        let integrity: [String]
        let oldConnectionError: (any Error)?
    }

    /// Makes a store under a fresh covered folder, as the coordinator does (folder synced once the database file
    /// exists), commits 40 one-row transactions (a checkpoint halfway), cuts the power, and reopens it.
    func cut(synchronous: Database.Configuration.Synchronous, mode: SimulatedDisk.PowerCutMode, seed: UInt64) throws -> AfterCut {
        let directory = TemporaryDirectory()
        let disk = SimulatedDisk(root: directory.path)
        defer { disk.stopModelling() }
        var configuration = Database.Configuration()
        configuration.synchronous = synchronous
        configuration.fileSystem = .simulated(disk)
        let database = try Database(path: directory.file("store.sqlite"), key: key, configuration: configuration)
        try database.execute("CREATE TABLE rows(n INTEGER PRIMARY KEY, data BLOB NOT NULL)")
        try DiskIO.syncDirectory(directory.path, in: .simulated(disk))
        for n in 0..<40 {
            try database.execute("INSERT INTO rows(n, data) VALUES (?, ?)", [.integer(Int64(n)), .blob([UInt8](repeating: UInt8(n % 251), count: 700))])
            if n == 20 { try database.checkpoint() }
        }
        var random = SplitMix64(seed: seed)
        try disk.powerCut(mode, random: &random)
        var oldConnectionError: (any Error)?
        do { try database.execute("INSERT INTO rows(n, data) VALUES (1000, x'00')") } catch { oldConnectionError = error }
        database.close()

        let reopened = try Database(path: directory.file("store.sqlite"), key: key)
        defer { reopened.close() }
        let rows = try reopened.rows("SELECT n FROM rows ORDER BY n").map { row -> Int64 in
            guard case .integer(let n) = row[0] else { return -1 }
            return n
        }
        return AfterCut(rows: rows, integrity: try reopened.integrityCheck(), oldConnectionError: oldConnectionError)
    }

    @Test("synchronous FULL: every committed transaction survives a cut in every mode, the store passes integrity_check, and the old connection is dead")
    func fullKeepsEveryCommit() throws {
        for mode in SimulatedDisk.PowerCutMode.allCases {
            for seed: UInt64 in 1...6 {
                let after = try cut(synchronous: .full, mode: mode, seed: seed)
                #expect(after.oldConnectionError != nil, "\(mode) seed \(seed): the connection from before the cut wrote")
                #expect(after.rows == Array(0..<40), "\(mode) seed \(seed)")
                #expect(after.integrity == ["ok"], "\(mode) seed \(seed)")
            }
        }
    }

    @Test("synchronous NORMAL: a cut may lose the last commits, only whole ones, never an earlier one")
    func normalLosesOnlyTrailingCommits() throws {
        var lostSome = false
        for mode in SimulatedDisk.PowerCutMode.allCases {
            for seed: UInt64 in 1...6 {
                let after = try cut(synchronous: .normal, mode: mode, seed: seed)
                #expect(after.rows == Array(0..<Int64(after.rows.count)), "\(mode) seed \(seed): a prefix of the commits")
                #expect(after.rows.count >= 21, "\(mode) seed \(seed): what the checkpoint synced is kept")
                #expect(after.integrity == ["ok"], "\(mode) seed \(seed)")
                if after.rows.count < 40 { lostSome = true }
            }
        }
        #expect(lostSome, "NORMAL does lose unsynced commits: the model is not keeping everything")
    }

    @Test("a database opened with the default configuration is on the real file system: a simulated disk over its folder records none of its writes; one opened on the disk's file system is recorded")
    func defaultConfigurationIsNotModelled() throws {
        let directory = TemporaryDirectory()
        let disk = SimulatedDisk(root: directory.path)
        defer { disk.stopModelling() }
        // NORMAL: a commit does not sync the log, so what a modelled connection wrote stays pending.
        var real = Database.Configuration()
        real.synchronous = .normal
        let plain = try Database(path: directory.file("real.sqlite"), key: key, configuration: real)
        defer { plain.close() }
        try plain.execute("CREATE TABLE rows(n INTEGER PRIMARY KEY)")
        #expect(disk.unsyncedChanges.pieces == 0 && disk.unsyncedChanges.entryChanges == 0, "nothing recorded")
        var simulated = real
        simulated.fileSystem = .simulated(disk)
        let modelled = try Database(path: directory.file("modelled.sqlite"), key: key, configuration: simulated)
        defer { modelled.close() }
        try modelled.execute("CREATE TABLE rows(n INTEGER PRIMARY KEY)")
        #expect(disk.unsyncedChanges.pieces > 0, "its log's writes wait for a sync")
    }
}
