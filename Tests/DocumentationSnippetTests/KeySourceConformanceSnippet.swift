// The code of Sources/ProtectedStoreTesting/Documentation.docc/ProtectedStoreTesting.md, "Checking a key source
// of your own" (scripts/doc-snippets.py checks that the region is, byte for byte, the article's block). The
// region is itself a test: it runs with the others.

// snippet.key-source-conformance
import ProtectedStoreTesting
import Testing
// snippet.hide

/// The app's own key source of the article's test — here the simulated device behind it, locked with no grace
/// period, on a temporary state directory.
final class MyKeychainKeySource: KeyAvailabilityMonitor, StoreKeyProvider {
    private let device: KeybagDevice
    private let passcode = "1234"

    init(service: String) throws {
        device = try KeybagDevice.setUp(
            in: temporaryStateDirectory(), passcode: SecureBytes(utf8: passcode),
            configuration: .init(gracePeriod: .zero, kdf: .minimal))
    }

    func lock() { device.lockWithoutGracePeriod() }
    func unlock() throws { try device.unlock(passcode: SecureBytes(utf8: passcode)) }

    func isProtectedDataAvailable(for protectionClass: ProtectionClass) -> Bool {
        device.isProtectedDataAvailable(for: protectionClass)
    }
    func subscribe(
        _ handler: @escaping @Sendable (ProtectedDataEvent) -> Void
    ) -> (availability: ProtectedDataAvailability, subscription: EventSubscription) {
        device.subscribe(handler)
    }
    func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup {
        try device.lookUpStoreKey(forStoreAt: storePath)
    }
    func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes {
        try device.createStoreKey(forStoreAt: storePath, protectionClass: protectionClass)
    }
    func storeKeyRecord(forStoreAt storePath: String) throws -> StoreKeyRecord? {
        try device.storeKeyRecord(forStoreAt: storePath)
    }
}

@Suite("ProtectedStoreTesting.md: checking a key source", .timeLimit(.minutes(3)))
struct KeySourceConformanceSnippet {
    // snippet.show

    @Test func myKeySourceKeepsTheContract() async throws {
        let source = try MyKeychainKeySource(service: "com.example.app.tests")
        let failures = await StoreKeySourceConformance.check(
            source, storesIn: temporaryFolder,
            lock: { $0.lock() }, unlock: { try $0.unlock() })
        #expect(failures.isEmpty, "\(failures)")
    }
    // snippet.end
}
