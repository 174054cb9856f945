import Foundation

import Testing

@testable import SecureKeys
import StoreConcurrency

@Suite("SecureBytes")
struct SecureBytesTests {
    @Test("guarded memory libsodium cannot allocate is an out-of-memory error, not a crash (issue 30)")
    func allocationFailureThrowsOutOfMemory() async {
        // In a process of its own: before the fix this stopped the process (`preconditionFailure`).
        await #expect(processExitsWith: .success) {
            // More than the address space holds: sodium_malloc's mmap fails, as it does once a process runs out
            // of memory or of memory mappings.
            do {
                _ = try SecureBytes(count: 1 << 60)
                exit(2)
            } catch let error as SecureKeysError where error.code == .outOfMemory {
                guard "\(error)".contains("guarded memory") else { exit(3) }
            } catch {
                exit(4)
            }
            do {
                _ = try SecureBytes.random(count: 1 << 60)
                exit(5)
            } catch let error as SecureKeysError where error.code == .outOfMemory {
            } catch {
                exit(6)
            }
            // And the process goes on: the next allocation that fits works.
            guard (try? SecureBytes(count: 32)) != nil else { exit(7) }
        }
    }

    @Test("a key unwrapped when the process has no address space left fails with out-of-memory, and the caller goes on (issue 30)")
    func unwrapUnderAddressSpaceLimitThrows() async {
        await #expect(processExitsWith: .success) {
            guard let key = try? SecureBytes.random(count: 32), let secret = try? SecureBytes.random(count: 32),
                let wrapped = try? KeyWrap.wrap(secret, with: key, associatedData: [1])
            else { exit(9) }
            // No new mapping from here on: guarded memory (its own mapping, with guard pages) cannot be had, and
            // no block a wiped value gave back waits for reuse.
            SecureBytes.freeSpareBlocks()
            var limit = rlimit()
            limit.rlim_cur = rlim_t(SecureBytesTests.addressSpaceInUse())
            limit.rlim_max = rlim_t.max
            guard setrlimit(Int32(RLIMIT_AS.rawValue), &limit) == 0 else { exit(2) }
            do {
                _ = try KeyWrap.unwrap(wrapped[...], with: key, associatedData: [1])
                exit(3)
            } catch let error as SecureKeysError where error.code == .outOfMemory {
                exit(0)
            } catch {
                exit(4)
            }
        }
    }

    /// The process's address space in use now (VmSize), in bytes.
    static func addressSpaceInUse() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmSize:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return 0 }
        return kilobytes * 1024
    }

    @Test("a wiped value's guarded block is kept, zeroed, for the next value of its length; the stack keeps the most recent blocks, up to its capacity")
    func spareBlocksAreReusedByLength() throws {
        let spares = SecureBytes.SpareBlocks(capacity: 2)
        let blocks = (0..<3).map { _ in UnsafeMutableRawPointer.allocate(byteCount: 1, alignment: 1) }
        defer { blocks.forEach { $0.deallocate() } }
        #expect(spares.keep(blocks[0], length: 32) == nil)
        #expect(spares.keep(blocks[1], length: 64) == nil)
        #expect(spares.take(length: 48) == nil, "no block of another length")
        #expect(spares.keep(blocks[2], length: 32) == blocks[0], "the block kept longest goes when the stack is full")
        #expect(spares.take(length: 32) == blocks[2])
        #expect(spares.take(length: 32) == nil)
        #expect(spares.takeAny() == blocks[1])
        #expect(spares.takeAny() == nil)
    }

    @Test("a value made after another of its length was wiped starts zeroed")
    func valueAfterAWipeStartsZeroed() throws {
        for _ in 0..<3 {
            let secret = try SecureBytes.random(count: 48)
            #expect(try secret.withUnsafeBytes { $0.contains { $0 != 0 } })
            secret.wipe()
            let next = try SecureBytes(count: 48)
            #expect(try next.withUnsafeBytes { $0.allSatisfy { $0 == 0 } })
        }
    }

    @Test("description is redacted and shows only the length")
    func descriptionIsRedacted() throws {
        let secret = try SecureBytes(utf8: "hunter2-secret")
        #expect(String(describing: secret) == "SecureBytes(14 bytes, redacted)")
        #expect(!"\(secret)".contains("hunter2"))
        #expect(!String(reflecting: secret).contains("hunter2"))
    }

    @Test("wipe zeroes every byte before the memory is freed, and later access throws key-wiped")
    func wipeZeroesAndForbidsLaterAccess() throws {
        let secret = try SecureBytes.random(count: 64)
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
    func deinitZeroes() throws {
        let observed = LockedState<Bool?>(nil)
        do {
            let secret = try SecureBytes.random(count: 32)
            secret.onWipe = { allZero in observed.withLock { $0 = allZero } }
        }
        #expect(observed.withLock { $0 } == true)
    }

    @Test("constant-time comparison tells equal and unequal secrets apart")
    func constantTimeEquality() throws {
        let a = try SecureBytes(utf8: "same bytes")
        let b = try SecureBytes(utf8: "same bytes")
        let c = try SecureBytes(utf8: "other byte")
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
