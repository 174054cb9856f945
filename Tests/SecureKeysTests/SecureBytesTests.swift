
import Testing

@testable import SecureKeys

@Suite("SecureBytes")
struct SecureBytesTests {
    @Test("description is redacted and shows only the length")
    func descriptionIsRedacted() throws {
        let secret = SecureBytes(utf8: "hunter2-secret")
        #expect(String(describing: secret) == "SecureBytes(14 bytes, redacted)")
        #expect(!"\(secret)".contains("hunter2"))
        #expect(!String(reflecting: secret).contains("hunter2"))
    }

    @Test("wipe zeroes every byte before the memory is freed, and later access throws key-wiped")
    func wipeZeroesAndForbidsLaterAccess() throws {
        let secret = SecureBytes.random(count: 64)
        #expect(try secret.withUnsafeBytes { $0.contains { $0 != 0 } })
        let observed = LockedState<Bool?>(nil)
        secret.onWipe = { allZero in observed.withLock { $0 = allZero } }
        secret.wipe()
        #expect(observed.withLock { $0 } == true)
        #expect(secret.isWiped)
        #expect(throws: SecureKeysError.self) { try secret.withUnsafeBytes { _ in } }
        do {
            try secret.withUnsafeBytes { _ in }
        } catch let error as SecureKeysError {
            #expect(error.code == .keyWiped)
        }
    }

    @Test("releasing the last reference zeroes the bytes")
    func deinitZeroes() {
        let observed = LockedState<Bool?>(nil)
        do {
            let secret = SecureBytes.random(count: 32)
            secret.onWipe = { allZero in observed.withLock { $0 = allZero } }
        }
        #expect(observed.withLock { $0 } == true)
    }

    @Test("constant-time comparison tells equal and unequal secrets apart")
    func constantTimeEquality() throws {
        let a = SecureBytes(utf8: "same bytes")
        let b = SecureBytes(utf8: "same bytes")
        let c = SecureBytes(utf8: "other byte")
        #expect(a.constantTimeEquals(b))
        #expect(!a.constantTimeEquals(c))
        b.wipe()
        #expect(!a.constantTimeEquals(b))
    }

    @Test("seeded randomness reproduces the same stream; system randomness does not repeat")
    func seededRandomIsReproducible() throws {
        let first = SeededRandom(seed: 42)
        let second = SeededRandom(seed: 42)
        #expect(first.bytes(count: 16) + first.bytes(count: 40) == second.bytes(count: 16) + second.bytes(count: 40))
        #expect(SeededRandom(seed: 1).bytes(count: 32) != SeededRandom(seed: 2).bytes(count: 32))
        #expect(SystemRandom().bytes(count: 32) != SystemRandom().bytes(count: 32))
    }
}
