import TestSupport
import Foundation
import SecureKeys
import Testing

@testable import EncryptedSQLite

/// SQLCipher's store under the simulated disk (through the protected-store-disk VFS): what a power cut keeps.
@Suite("Power cuts under SQLite")
struct PowerCutTests {
    let key = SecureBytes.random(count: 32)

    /// Makes a store with a table under a fresh covered folder, as the coordinator does (folder synced after
    /// the database file is created), then `commits` one-row transactions (a checkpoint halfway).
    func storeWithCommits(
        _ commits: Int, synchronous: Database.Configuration.Synchronous, in directory: TemporaryDirectory, disk: SimulatedDisk
    ) throws -> Database {
        var configuration = Database.Configuration()
        configuration.synchronous = synchronous
        let database = try Database(path: directory.file("store.sqlite"), key: key, configuration: configuration)
        try database.execute("CREATE TABLE rows(n INTEGER PRIMARY KEY, data BLOB NOT NULL)")
        try DiskIO.syncDirectory(directory.path)
        for n in 0..<commits {
            try database.execute("INSERT INTO rows(n, data) VALUES (?, ?)", [.integer(Int64(n)), .blob([UInt8](repeating: UInt8(n % 251), count: 700))])
            if n == commits / 2 { try database.checkpoint() }
        }
        return database
    }

    func surviving(in directory: TemporaryDirectory) throws -> (rows: [Int64], integrity: [String]) {
        let reopened = try Database(path: directory.file("store.sqlite"), key: key)
        defer { reopened.close() }
        let rows = try reopened.rows("SELECT n FROM rows ORDER BY n").map { row -> Int64 in
            guard case .integer(let n) = row[0] else { return -1 }
            return n
        }
        return (rows, try reopened.integrityCheck())
    }

    @Test("synchronous FULL: every committed transaction survives a cut in every mode, the store passes integrity_check, and the old connection is dead")
    func fullKeepsEveryCommit() throws {
        for mode in SimulatedDisk.PowerCutMode.allCases {
            for seed: UInt64 in 1...6 {
                let directory = TemporaryDirectory()
                let disk = SimulatedDisk(root: directory.path)
                defer { disk.stopModelling() }
                let database = try storeWithCommits(40, synchronous: .full, in: directory, disk: disk)
                var random = SplitMix64(seed: seed)
                try disk.powerCut(mode, random: &random)
                #expect(throws: (any Error).self, "\(mode) seed \(seed): the connection from before the cut") {
                    try database.execute("INSERT INTO rows(n, data) VALUES (1000, x'00')")
                }
                database.close()
                let (rows, integrity) = try surviving(in: directory)
                #expect(rows == Array(0..<40), "\(mode) seed \(seed)")
                #expect(integrity == ["ok"], "\(mode) seed \(seed)")
            }
        }
    }

    @Test("synchronous NORMAL: a cut may lose the last commits, only whole ones, never an earlier one")
    func normalLosesOnlyTrailingCommits() throws {
        var lostSome = false
        for mode in SimulatedDisk.PowerCutMode.allCases {
            for seed: UInt64 in 1...6 {
                let directory = TemporaryDirectory()
                let disk = SimulatedDisk(root: directory.path)
                defer { disk.stopModelling() }
                let database = try storeWithCommits(40, synchronous: .normal, in: directory, disk: disk)
                var random = SplitMix64(seed: seed)
                try disk.powerCut(mode, random: &random)
                database.close()
                let (rows, integrity) = try surviving(in: directory)
                #expect(rows == Array(0..<Int64(rows.count)), "\(mode) seed \(seed): a prefix of the commits")
                #expect(rows.count >= 21, "\(mode) seed \(seed): what the checkpoint synced is kept")
                #expect(integrity == ["ok"], "\(mode) seed \(seed)")
                if rows.count < 40 { lostSome = true }
            }
        }
        #expect(lostSome, "NORMAL does lose unsynced commits: the model is not keeping everything")
    }
}
