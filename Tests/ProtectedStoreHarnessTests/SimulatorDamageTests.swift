import TestSupport
import Foundation
import ProtectedStore
import Testing

@testable import ProtectedStoreHarness

/// Damage mode beyond the inbox (issue 26, "The method"): the generator damages the store's key file, the
/// keybag and the device state file, meets the damage, restores the file and goes on; the oracle requires
/// the damage reported and the damaged bytes left as they are.
@MainActor
@Suite("Simulator damage mode", .timeLimit(.minutes(10)))
struct SimulatorDamageTests {
    @Test("a short simulation damages a store key file, a keybag and a device state file, meets and restores each, and holds")
    func reachesEveryFileDamage() async throws {
        var coverage = CoverageTally()
        for seed: UInt64 in 1...12 {
            let run = try await Simulator.run(seed: seed, steps: 200)
            #expect(run.violation == nil, "seed \(seed): \(run.violation.map(String.init(describing:)) ?? "")")
            // Every damage is restored, and every device file's restore booted from and checked, but the last
            // one when the run ends first.
            let damaged = run.coverage.damagedKeyFiles + run.coverage.damagedKeybags + run.coverage.damagedDeviceStates
                + run.coverage.truncatedStoreFiles + run.coverage.linkedStoreFiles + run.coverage.fifoStoreFiles
            #expect((damaged - 1...damaged).contains(run.coverage.restoredFiles), "seed \(seed): \(run.coverage.summaryLines)")
            let devices = run.coverage.damagedKeybags + run.coverage.damagedDeviceStates
            #expect((devices - 1...devices).contains(run.coverage.bootsAfterRestore), "seed \(seed): \(run.coverage.summaryLines)")
            coverage += run.coverage
        }
        #expect(coverage.damagedKeyFiles > 0, "\(coverage.summaryLines)")
        #expect(coverage.damagedKeybags > 0, "\(coverage.summaryLines)")
        #expect(coverage.damagedDeviceStates > 0, "\(coverage.summaryLines)")
        #expect(coverage.restoredFiles > 0 && coverage.bootsAfterRestore > 0, "\(coverage.summaryLines)")
        // The store's own files: cut short, and replaced by links and FIFOs — each refused, none taken for new.
        #expect(coverage.truncatedStoreFiles > 0, "\(coverage.summaryLines)")
        #expect(coverage.linkedStoreFiles > 0, "\(coverage.summaryLines)")
        #expect(coverage.fifoStoreFiles > 0, "\(coverage.summaryLines)")
    }

    @Test(
        "a store file cut short, or a link or a FIFO in place of the store file, its log or its index, is refused by the attach with the code the oracle expects, left as it is, and the store comes back whole after the restore",
        arguments: [
            (DamagedFile.store, Damage.truncate(0)), (.store, .truncate(1)), (.store, .truncate(100)), (.store, .link),
            (.store, .fifo), (.storeLog, .link), (.storeLog, .fifo), (.storeSharedMemory, .link), (.storeSharedMemory, .fifo),
        ])
    func storeFileDamageIsRefused(file: DamagedFile, damage: Damage) async throws {
        let directory = TemporaryDirectory()
        let session = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal, output: { _ in })
        var model = SimulationModel(gracePeriod: .seconds(10))
        let launch = ScenarioCommand.appLaunch(LaunchOptions(reason: .user), protection: nil, attachDelay: .zero)
        // A crash leaves the log and the index beside the store, holding the acknowledged put.
        let commands: [ScenarioCommand] = [
            .deviceSetup(passcode: "1234", grace: .seconds(10), wipeAfter: nil), launch, .put(key: "k", value: "v"),
            .appCrash, .damage(file, damage), launch,
        ]
        for command in commands {
            _ = model.apply(command)
            await session.execute(command)
            #expect(session.lastError == nil, "\(command.scriptLine): \(String(describing: session.lastError))")
        }
        let expected: StoreError.Code = damage == .link || damage == .fifo ? .ioError : .storeDamaged
        #expect(session.controller?.phase.name == "failed")
        #expect(session.controller?.presentedError?.code == expected, "\(String(describing: session.controller?.presentedError))")
        #expect(Simulator.checkDamage(session: session, model: model)?.message == nil)

        for command: ScenarioCommand in [.appTerminate, .damage(file, .restore), launch] {
            _ = model.apply(command)
            await session.execute(command)
            #expect(session.lastError == nil, "\(command.scriptLine): \(String(describing: session.lastError))")
        }
        #expect(session.controller?.phase.name == "ready")
        #expect(await session.execute(.expect(.value(key: "k", value: "v"))) == nil, "the acknowledged put is there")
    }

    @Test("the oracle finds a store that attached over a store file cut short, and a FIFO put in a file's place that was removed")
    func oracleFindsStoreFileDamageTakenForNew() async throws {
        let directory = TemporaryDirectory()
        let session = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal, output: { _ in })
        var model = SimulationModel(gracePeriod: .seconds(10))
        let launch = ScenarioCommand.appLaunch(LaunchOptions(reason: .user), protection: nil, attachDelay: .zero)
        for command: ScenarioCommand in [
            .deviceSetup(passcode: "1234", grace: .seconds(10), wipeAfter: nil), launch, .appTerminate, .damage(.storeLog, .fifo),
        ] {
            _ = model.apply(command)
            await session.execute(command)
        }
        #expect(Simulator.checkDamage(session: session, model: model)?.message == nil)
        // What a tool that "recovers" by clearing the way does: the FIFO is gone.
        try FileManager.default.removeItem(atPath: session.path(of: .storeLog))
        #expect(Simulator.checkDamage(session: session, model: model)?.message.contains("was removed") == true)
        // A store that attached anyway: the oracle holds a store file damaged while the store is ready.
        _ = model.apply(.damage(.storeLog, .restore))
        await session.execute(.damage(.storeLog, .restore))
        await session.execute(launch)
        #expect(session.controller?.phase.name == "ready")
        model.damaged = .store
        #expect(Simulator.checkDamage(session: session, model: model)?.message.contains("attached") == true)
    }

    @Test("the model expects a boot to fail on a damaged keybag or state file, and to succeed after the restore")
    func modelOfDamagedDeviceFiles() {
        var model = SimulationModel(gracePeriod: .seconds(10))
        _ = model.apply(.deviceSetup(passcode: "1234", grace: .seconds(10), wipeAfter: nil))
        for (file, error) in [(DamagedFile.keybag, "key-file-damaged"), (.deviceState, "device-state-damaged")] {
            #expect(model.apply(.damage(file, .flipByte(offset: 3))) == nil)
            #expect(model.apply(.deviceReboot) == error)
            #expect(model.bootFailed)
            #expect(model.apply(.damage(file, .restore)) == nil)
            #expect(model.apply(.deviceReboot) == nil)
            #expect(!model.bootFailed && model.damaged == nil)
        }
        #expect(model.apply(.damage(.keybag, .restore)) == "invalid-argument", "nothing to restore")
    }

    @Test("the oracle finds a damaged key file that was replaced or removed, and a store that attached with it")
    func oracleFindsReplacedDamage() async throws {
        let directory = TemporaryDirectory()
        let session = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal, output: { _ in })
        var model = SimulationModel(gracePeriod: .seconds(10))
        let commands: [ScenarioCommand] = [
            .deviceSetup(passcode: "1234", grace: .seconds(10), wipeAfter: nil),
            .appLaunch(LaunchOptions(reason: .user), protection: nil, attachDelay: .zero),
            .appTerminate,
            .damage(.storeKey, .flipByte(offset: 40)),
            .appLaunch(LaunchOptions(reason: .user), protection: nil, attachDelay: .zero),
        ]
        for command in commands {
            _ = model.apply(command)
            await session.execute(command)
        }
        #expect(session.controller?.presentedError?.code == .keyFileDamaged)
        #expect(Simulator.checkDamage(session: session, model: model)?.message == nil)
        // What a tool that "recovers" by writing a new key does: the damaged bytes are gone.
        let path = session.path(of: .storeKey)
        let damaged = try Data(contentsOf: URL(fileURLWithPath: path))
        try Data(repeating: 7, count: damaged.count).write(to: URL(fileURLWithPath: path))
        #expect(Simulator.checkDamage(session: session, model: model)?.message.contains("was overwritten") == true)
        try FileManager.default.removeItem(atPath: path)
        #expect(Simulator.checkDamage(session: session, model: model)?.message.contains("was removed") == true)
        // A store that attached anyway.
        try damaged.write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        model.damaged = .storeKey
        _ = model.apply(.damage(.storeKey, .restore))
        await session.execute(.damage(.storeKey, .restore))
        model.damaged = .storeKey
        await session.execute(.appTerminate)
        await session.execute(.appLaunch(LaunchOptions(reason: .user), protection: nil, attachDelay: .zero))
        #expect(session.controller?.phase == .ready)
        #expect(Simulator.checkDamage(session: session, model: model)?.message.contains("attached") == true)
    }
}
