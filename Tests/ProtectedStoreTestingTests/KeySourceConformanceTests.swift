import Foundation
import ProtectedStore
import ProtectedStoreTesting
import TestSupport
import Testing

/// The key-source conformance suite against the sources the package ships and a memory-only one, and the suite
/// itself against sources that break a rule on purpose.
@Suite("StoreKeySourceConformance", .timeLimit(.minutes(5)))
struct KeySourceConformanceTests {
    @Test("the simulated device keeps the key-source contract")
    @MainActor
    func simulatedDeviceConforms() async throws {
        let environment = try ProtectedStoreTestEnvironment(gracePeriod: .zero)
        let stores = environment.stateDirectory + "/stores"
        try FileManager.default.createDirectory(atPath: stores, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        let passcode = environment.passcode
        let failures = await StoreKeySourceConformance.check(
            environment.device, storesIn: stores,
            lock: { $0.lockWithoutGracePeriod() },
            unlock: { try $0.unlock(passcode: SecureBytes(utf8: passcode)) })
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test("the device agent's client keeps the key-source contract")
    func agentClientConforms() async throws {
        let directory = TemporaryDirectory()
        let agent = try DeviceAgent(stateDirectory: directory.path, configuration: .init(kdf: .minimal))
        let served = DispatchSemaphore(value: 0)
        Thread {
            agent.serve()
            served.signal()
        }.start()
        defer {
            agent.stop()
            #expect(served.wait(timeout: .now() + 30) == .success, "serve() did not return after stop()")
        }
        let client = try #require(try DeviceAgentClient.connect(toAgentOf: directory.path, clientName: "conformance"))
        defer { client.disconnect() }
        try client.setUp(passcode: SecureBytes(utf8: "1234"), gracePeriod: .seconds(1))
        let failures = await StoreKeySourceConformance.check(
            client, storesIn: directory.path,
            lock: { client in
                try client.lock()
                // The agent's clock is virtual: the grace period ends when it is moved past it.
                try client.advanceClock(by: .seconds(2))
            },
            unlock: { try $0.unlock(passcode: SecureBytes(utf8: "1234")) })
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test("a memory-only key source keeps the key-source contract")
    func memorySourceConforms() async throws {
        let directory = TemporaryDirectory()
        let failures = await StoreKeySourceConformance.check(
            MemoryKeySource(), storesIn: directory.path, lock: { $0.lock() }, unlock: { $0.unlock() })
        #expect(failures.isEmpty, "\(failures)")
    }

    @Test(
        "the suite names each rule a source breaks: records nothing, mints while locked, absent while locked, wipes returned keys, copies on a move",
        arguments: [
            (MemoryKeySource.Breakage.recordsNothing, [StoreKeySourceConformance.Rule.recordsTheNewKey]),
            (.mintsWhileLocked, [.neverMintsWhileLocked, .neverMintsWhileLocked]),
            (.absentWhileLocked, [.lockedWhileLocked, .attachesThroughTheLibrary]),
            (.wipesReturnedKeys, [.neverWipesAReturnedKey]),
            (.copiesOnMove, [.movesAKey, .movesAKey]),
        ])
    func suiteNamesBrokenRules(breakage: MemoryKeySource.Breakage, broken: [StoreKeySourceConformance.Rule]) async throws {
        let directory = TemporaryDirectory()
        let failures = await StoreKeySourceConformance.check(
            MemoryKeySource(breaking: [breakage]), storesIn: directory.path, lock: { $0.lock() }, unlock: { $0.unlock() })
        #expect(failures.map(\.rule) == broken, "\(failures)")
        #expect(failures.allSatisfy { !$0.message.isEmpty })
    }

    @Test("a memory-only key source attaches, locks and unlocks through the public API, with no key file in the state directory")
    @MainActor
    func memoryOnlySourceAttachesLocksAndUnlocks() async throws {
        let directory = TemporaryDirectory()
        let keys = MemoryKeySource()
        let store = StoreConfiguration(path: directory.file("app.sqlite"), protectionClass: .complete)
        let controller = DataController(configuration: .init(store: store), keys: keys)
        let phases = controller.phases()
        controller.launch()
        try await expect(phases, .ready)
        try await controller.perform("save") { try await $0.put("k", "v") }

        keys.lock()
        try await expect(phases, .waitingForProtectedData)
        #expect(controller.coordinator == nil)
        let queued = try controller.submit("save while locked") { try await $0.put("queued", "w") }

        keys.unlock()
        try await expect(phases, .ready)
        guard case .completed = await queued.result() else {
            Issue.record("the write queued while locked did not complete: \(String(describing: queued.outcome))")
            return
        }
        let entries = try await controller.perform("read") { try await $0.allEntries().map { "\($0.key)=\($0.value)" } }
        #expect(entries == ["k=v", "queued=w"])
        await controller.terminate()

        let files = StoreFiles(database: store.path)
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        #expect(!left.contains { directory.file($0) == files.key }, "no key file: \(left)")
        #expect(!left.contains { directory.file($0) == files.creationMarker }, "the creation finished: \(left)")
    }

    @Test("a source that makes a key it records nothing of fails the attach with key-source-inconsistent, and makes no store")
    @MainActor
    func sourceWithoutRecordIsNamed() async throws {
        let directory = TemporaryDirectory()
        let store = StoreConfiguration(path: directory.file("app.sqlite"), protectionClass: .complete)
        let controller = DataController(configuration: .init(store: store), keys: MemoryKeySource(breaking: [.recordsNothing]))
        let phases = controller.phases()
        controller.launch()
        let failed = try await expectFailed(phases)
        #expect(failed.code == .keySourceInconsistent)
        #expect(failed.message.contains("MemoryKeySource"), "\(failed.message)")
        #expect(failed.message.contains("storeKeyRecord"), "\(failed.message)")
        #expect(!FileManager.default.fileExists(atPath: store.path))
        await controller.terminate()
    }

    /// Waits for `phase` on the stream (skipping the ones before it), for at most 30 s.
    @MainActor
    private func expect(_ phases: AsyncStream<DataController.Phase>, _ phase: DataController.Phase) async throws {
        let found = try await withThrowingTaskGroup(of: DataController.Phase?.self) { group in
            group.addTask { for await next in phases where next == phase { return next }; return nil }
            group.addTask { try await Task.sleep(for: .seconds(30)); return nil }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        #expect(found == phase, "expected the phase \(phase.name), it never came")
    }

    /// Waits for a failed phase, for at most 30 s, and returns its error.
    @MainActor
    private func expectFailed(_ phases: AsyncStream<DataController.Phase>) async throws -> StoreError {
        let found = try await withThrowingTaskGroup(of: StoreError?.self) { group in
            group.addTask {
                for await next in phases { if case .failed(let error) = next { return error } }
                return nil
            }
            group.addTask { try await Task.sleep(for: .seconds(30)); return nil }
            defer { group.cancelAll() }
            return try await group.next() ?? nil
        }
        return try #require(found, "the attach never failed")
    }
}
