import TestSupport
import Foundation
import ProtectedData
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

@Suite("Secrets in memory", .timeLimit(.minutes(3)))
@MainActor
struct SecretsInMemoryTests {
    /// A copy of `bytes` in guarded memory, and where it lies (so the scan does not count the copy itself).
    func reference(_ bytes: SecureBytes) throws -> (copy: SecureBytes, range: Range<UInt>) {
        let copy = try bytes.withUnsafeBytes { try SecureBytes(copying: $0) }
        let start = try copy.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
        return (copy, start..<start + UInt(copy.count))
    }

    /// SQLCipher's form of a raw key, `x'<hex>'`, which it keeps while the store is open. Built in guarded
    /// memory byte by byte: a Swift `String` of it would itself be a copy left in the heap.
    func hexLiteral(_ key: SecureBytes) throws -> SecureBytes {
        let literal = try SecureBytes(count: 3 + 2 * key.count)
        let digits = Array("0123456789abcdef".utf8)
        try key.withUnsafeBytes { bytes in
            try literal.withUnsafeMutableBytes { out in
                out[0] = UInt8(ascii: "x")
                out[1] = UInt8(ascii: "'")
                for (index, byte) in bytes.enumerated() {
                    out[2 + 2 * index] = digits[Int(byte >> 4)]
                    out[3 + 2 * index] = digits[Int(byte & 0x0f)]
                }
                out[out.count - 1] = UInt8(ascii: "'")
            }
        }
        return literal
    }

    func occurrences(of secrets: [(copy: SecureBytes, range: Range<UInt>)]) throws -> [Int] {
        try secrets.map { secret in
            try secret.copy.withUnsafeBytes { try ProcessMemory.occurrences(of: $0, excluding: secrets.map(\.range)).count }
        }
    }

    @Test("after the grace period, no copy of the class-A key or of a class-A store's key (raw or as SQLCipher's literal) is left in the process's memory")
    func noClassAKeyInMemoryAfterGrace() async throws {
        let fixture = try ControllerFixture(protectionClass: .complete)
        await fixture.launch()
        #expect(fixture.controller.phase == .ready)
        let coordinator = try #require(fixture.controller.coordinator)
        try await coordinator.put("secret-note", "kept under class A")
        // Readers too: each holds the store key in SQLCipher's codec, and the pool holds one to open them.
        try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<8 { group.addTask { try await coordinator.value(forKey: "secret-note") } }
            for try await value in group { #expect(value == "kept under class A") }
        }
        #expect(coordinator.openReaderCount >= 1)

        let classKey = try reference(try #require(fixture.device.classKey(.complete)))
        guard case .available(let storeKey) = try fixture.device.lookUpStoreKey(forStoreAt: fixture.storePath) else {
            Issue.record("the store key is not available while unlocked")
            return
        }
        let rawStoreKey = try reference(storeKey)
        let literal = try reference(try hexLiteral(storeKey))
        storeKey.wipe()
        let secrets = [classKey, rawStoreKey, literal]

        // The scan can fail: while unlocked, the device holds the class key and SQLCipher the store key.
        let whileOpen = try occurrences(of: secrets)
        #expect(whileOpen[0] > 0, "the live class-A key is found by the scan")
        #expect(whileOpen[1] > 0, "SQLCipher's copy of the open store's key is found by the scan")

        await fixture.lock()
        await fixture.advance(.seconds(10))
        #expect(fixture.controller.coordinator == nil)
        let afterGrace = try occurrences(of: secrets)
        #expect(afterGrace == [0, 0, 0], "copies left of the class-A key, the store key, the store key literal: \(afterGrace)")
        for secret in secrets { secret.copy.wipe() }
    }
}
