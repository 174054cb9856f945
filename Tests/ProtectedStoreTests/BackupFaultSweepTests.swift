import DiskModel
import TestSupport
import EncryptedSQLite
import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// The I/O fault sweep (SQLite's `do_ioerr_test`, as `IOFaultSweepTests`) over backup and restore: for each
/// kind of fault — a power cut that drops everything unsynced, and ENOSPC, EIO and a short write — and for
/// N = 1, 2, … until the operation completes with the fault unused, the N-th file-system call of the operation
/// fails. Afterwards (a reboot, after a power cut every other round): the old store is whole, with every
/// acknowledged value; a backup that said it was written restores, and any backup file left is whole (it
/// restores) — never a part-written one; a restore that said done left the restored store, one that failed
/// left the old store in its place or whole in the folder it was kept in, and a second restore completes it.
@Suite("Backup and restore: I/O fault sweeps", .serialized)
struct BackupFaultSweepTests {
    static let kinds = [DiskFaultSweep.Kind.powerCut()] + DiskFaultSweep.Kind.errors

    /// The store's values after a round, or the error its attach threw.
    static func attachedValues(_ fixture: FaultFixture, at path: String? = nil) async -> Result<[String: String], any Error> {
        do {
            let coordinator = try await StoreCoordinator.attach(
                fixture.configuration(at: path ?? fixture.storePath), keys: fixture.device!)
            let entries = try await coordinator.allEntries()
            await coordinator.close()
            return .success(Dictionary(entries.map { ($0.key, $0.value) }) { first, _ in first })
        } catch {
            return .failure(error)
        }
    }

    @Test("backup under a fault: the store keeps every acknowledged value; the backup file is absent or whole", arguments: kinds)
    func backup(kind: DiskFaultSweep.Kind) async throws {
        var violations: [String] = []
        let (phrase, recoveryKey) = try RecoveryKey.create(kdf: .minimal)
        final class Round {
            let fixture = FaultFixture(stateFolder: "state")
            var coordinator: StoreCoordinator?
            var backupPath: String { fixture.diskRoot + "/store.backup" }
        }
        let report = try await DiskFaultSweep.run(kind) { () async throws -> (fileSystem: FileSystem, root: String, fixture: Round) in
            let round = Round()
            try round.fixture.setUpDevice()
            try round.fixture.unlock()
            let coordinator = try await StoreCoordinator.attach(round.fixture.configuration, keys: round.fixture.device!)
            for index in 0..<12 { try await round.fixture.put("k\(index)", "value \(index)", in: coordinator) }
            round.coordinator = coordinator
            return (round.fixture.fileSystem, round.fixture.diskRoot, round)
        } operation: { (round: Round) in
            _ = try await round.coordinator!.backup(to: round.backupPath, recoveryKey: recoveryKey)
        } check: { (round: Round, sweep: DiskFaultSweep.Round) in
            let label = "backup, \(kind), \(sweep.label)"
            if let error = sweep.error, !IOFaultSweepTests.isTyped(error) { violations.append("\(label): untyped \(error)") }
            await round.coordinator?.close()
            round.coordinator = nil
            let cut = sweep.failingCall % 2 == 0 || sweep.plan.powerCutReport != nil
            try round.fixture.reboot(cut: cut)
            try round.fixture.unlock()
            switch await Self.attachedValues(round.fixture) {
            case .success(let values):
                let lost = round.fixture.acknowledged.filter { values[$0.key] != $0.value }.map(\.key)
                if !lost.isEmpty { violations.append("\(label): acknowledged \(lost.sorted()) lost") }
            case .failure(let error):
                violations.append("\(label): the store does not attach after the backup: \(error)")
            }
            let exists = FileManager.default.fileExists(atPath: round.backupPath)
            if sweep.error == nil && !exists { violations.append("\(label): the backup said written, and is gone after the reboot") }
            guard exists else { return }
            // Whatever file is there is a whole backup: it restores, with every value.
            let target = try NewDevice()
            do {
                _ = try await target.restore(round.backupPath, phrase: try RecoveryPhrase(typed: phrase.text))
                let entries = try await target.tables()["entries"] ?? []
                if entries.count != round.fixture.acknowledged.count {
                    violations.append("\(label): the backup left restores \(entries.count) rows of \(round.fixture.acknowledged.count)")
                }
            } catch {
                violations.append("\(label): the backup file left does not restore: \(error)")
            }
        }
        print("I/O fault sweep backup, \(kind): \(report)")
        #expect(report.faultPoints >= 5, "the sweep failed too few calls: \(report)")
        for violation in violations { Issue.record("\(violation)") }
    }

    @Test("restore under a fault, over an existing store (replacing) and into a new one: the old store stays whole, the restored one is whole when it said done", arguments: kinds, [true, false])
    func restore(kind: DiskFaultSweep.Kind, replacing: Bool) async throws {
        let backup = try await BackupFixture()
        let restoredEntries = Set((backup.expected["entries"] ?? []).map { $0.first ?? "" })
        var violations: [String] = []
        // The state directory of each round's fixture as the restore found it.
        var before: [String: [String: [UInt8]?]] = [:]
        let report = try await DiskFaultSweep.run(kind) { () async throws -> (fileSystem: FileSystem, root: String, fixture: FaultFixture) in
            let fixture = FaultFixture()
            try fixture.setUpDevice()
            try fixture.unlock()
            if replacing {
                try await fixture.withStore { coordinator in
                    for index in 0..<5 { try await fixture.put("old\(index)", "the old store's \(index)", in: coordinator) }
                }
            }
            before[fixture.root] = Self.contents(of: fixture.root)
            return (fixture.fileSystem, fixture.root, fixture)
        } operation: { (fixture: FaultFixture) in
            _ = try await StoreBackup.restore(
                from: backup.backupPath, phrase: try backup.typedPhrase(), into: fixture.configuration, keys: fixture.device!,
                replacingExisting: replacing)
        } check: { (fixture: FaultFixture, sweep: DiskFaultSweep.Round) in
            let label = "restore\(replacing ? " replacing" : ""), \(kind), \(sweep.label)"
            if let error = sweep.error, !IOFaultSweepTests.isTyped(error) { violations.append("\(label): untyped \(error)") }
            // A restore that failed (on a disk that failed once, so that it can undo what it did) leaves the target
            // exactly as it found it: the same files, the same bytes — no key file without its store.
            if sweep.error != nil && kind.persistence == .transient {
                let after = Self.contents(of: fixture.root)
                let old = before[fixture.root] ?? [:]
                let changed = Set(old.keys).union(after.keys).filter { old[$0] != after[$0] }.sorted()
                if !changed.isEmpty { violations.append("\(label): the failed restore changed the target: \(changed)") }
            }
            let cut = sweep.failingCall % 2 == 0 || sweep.plan.powerCutReport != nil
            try fixture.reboot(cut: cut)
            try fixture.unlock()
            let folder = fixture.root
            let asides = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
                .filter { $0.hasPrefix("app.sqlite.replaced-") }.map { folder + "/" + $0 + "/app.sqlite" }
            func isOld(_ values: [String: String]) -> Bool { fixture.acknowledged.allSatisfy { values[$0.key] == $0.value } }
            func isRestored(_ values: [String: String]) -> Bool {
                Set(values.keys.map { "text:\($0)" }) == restoredEntries
            }
            var oldIsWhole = !replacing
            let inPlace = FileManager.default.fileExists(atPath: fixture.storePath) || FileManager.default.fileExists(atPath: fixture.files.key)
            if inPlace {
                switch await Self.attachedValues(fixture) {
                case .success(let values):
                    if isOld(values) && !fixture.acknowledged.isEmpty { oldIsWhole = true }
                    if sweep.error == nil && !isRestored(values) { violations.append("\(label): the restore said done, the store is not the backup's") }
                    if !isOld(values) && !isRestored(values) {
                        violations.append("\(label): the store in place is neither the old one nor the backup's: \(values.keys.sorted())")
                    }
                case .failure(let error):
                    if sweep.error == nil { violations.append("\(label): the restore said done, the store does not attach: \(error)") }
                    if !IOFaultSweepTests.isTyped(error) { violations.append("\(label): untyped attach error \(error)") }
                }
            } else if sweep.error == nil {
                violations.append("\(label): the restore said done and no store is there")
            }
            for aside in asides where !oldIsWhole {
                if case .success(let values) = await Self.attachedValues(fixture, at: aside), isOld(values) { oldIsWhole = true }
            }
            if !oldIsWhole { violations.append("\(label): the old store is whole neither in place nor aside (\(asides.count) folders aside)") }
            // What a failed restore left, a second restore (replacing, as the error asks) completes.
            if sweep.error != nil {
                do {
                    _ = try await StoreBackup.restore(
                        from: backup.backupPath, phrase: try backup.typedPhrase(), into: fixture.configuration,
                        keys: fixture.device!, replacingExisting: true)
                    if case .success(let values) = await Self.attachedValues(fixture), isRestored(values) {} else {
                        violations.append("\(label): the second restore did not leave the backup's store")
                    }
                } catch {
                    violations.append("\(label): the second restore failed: \(error)")
                }
            }
        }
        print("I/O fault sweep restore\(replacing ? " replacing" : ""), \(kind): \(report)")
        #expect(report.faultPoints >= 5, "the sweep failed too few calls: \(report)")
        for violation in violations { Issue.record("\(violation)") }
    }
}

extension FaultFixture {
    var files: StoreFiles { configuration.files }
}

extension BackupFaultSweepTests {
    /// Every file and folder under `root` (but the state directory's lock file and the simulated disk's own
    /// `.disk-model` folder, where it keeps the inodes a power cut could bring back), by relative path: a file's
    /// bytes, `nil` for a folder.
    static func contents(of root: String) -> [String: [UInt8]?] {
        var found: [String: [UInt8]?] = [:]
        for case let name as String in FileManager.default.enumerator(atPath: root) ?? FileManager.DirectoryEnumerator()
        where !name.hasSuffix(".lock") && !name.hasPrefix(".disk-model") {
            var isFolder: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: root + "/" + name, isDirectory: &isFolder)
            found[name] = isFolder.boolValue ? .some(nil) : .some(FileManager.default.contents(atPath: root + "/" + name).map { Array($0) } ?? [])
        }
        return found
    }
}
