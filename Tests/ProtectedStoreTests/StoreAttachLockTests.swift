import Foundation
import ProtectedData
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

/// Attaches of one folder's stores run one at a time (`StoreAttachLock`).
@MainActor
@Suite struct StoreAttachLockTests {
    @Test("eight attaches of one new store at once: one creates it, every one opens it, none fails")
    func concurrentAttachesOfANewStore() async throws {
        let fixture = try ControllerFixture()
        let configuration = StoreConfiguration(path: fixture.storePath)
        let device = fixture.device
        for round in 0..<5 {
            let path = fixture.directory.file("store-\(round).sqlite")
            let outcomes = await withTaskGroup(of: String.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        do {
                            var configuration = configuration
                            configuration.path = path
                            let coordinator = try await StoreCoordinator.attach(configuration, keys: device)
                            try await coordinator.put("k", "v")
                            await coordinator.close()
                            await coordinator.waitUntilThreadsStopped()
                            return "attached"
                        } catch {
                            return "\(error)"
                        }
                    }
                }
                var outcomes: [String] = []
                for await outcome in group { outcomes.append(outcome) }
                return outcomes
            }
            #expect(outcomes == Array(repeating: "attached", count: 8), "round \(round): \(outcomes)")
        }
    }

    @Test("a store reached through a link to its folder attaches: the lock follows the link")
    func storeThroughALinkedFolder() async throws {
        let fixture = try ControllerFixture()
        let elsewhere = TemporaryDirectory()
        let link = elsewhere.file("linked")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: fixture.directory.path)
        let coordinator = try await StoreCoordinator.attach(StoreConfiguration(path: link + "/app.sqlite"), keys: fixture.device)
        try await coordinator.put("k", "v")
        #expect(try await coordinator.value(forKey: "k") == "v")
        await coordinator.close()
        await coordinator.waitUntilThreadsStopped()
        withExtendedLifetime(elsewhere) {}
    }
}
