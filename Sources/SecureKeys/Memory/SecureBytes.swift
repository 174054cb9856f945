internal import CSodium
import Foundation
import StoreConcurrency
import Synchronization

/// Secret bytes in memory that libsodium guards.
///
/// `sodium_malloc` places them between guard pages and `mlock`s them, and they are zeroed before the memory is
/// given back.
///
/// The bytes are reachable only inside ``withUnsafeBytes(_:)``: there is no way to copy them into a Swift
/// `Array` or `String` by accident, because copy-on-write values leave copies nobody zeroes (the reason
/// swift-crypto has `SecureBytes` and swift-sodium's `[UInt8]` is the example to avoid). ``description`` is
/// redacted, so a secret printed by mistake shows only its length.
///
/// ``wipe()`` zeroes and releases the bytes at once, for keys whose lifetime ends at a known moment (a class
/// key at the end of a grace period). Any later access throws `SecureKeysError.Code.keyWiped`.
public final class SecureBytes: @unchecked Sendable {
    // @unchecked Sendable: `pointer` is only read or written while `lock` is held, and the bytes it points to
    // are only reached through the accessors below, which hold the lock for the duration of the access.

    /// The number of secret bytes.
    public let count: Int

    private var pointer: UnsafeMutableRawPointer?
    private let lock = NSRecursiveLock()

    /// A test hook for the wipe.
    ///
    /// It is called with `true` when every byte read back as zero just before the memory was freed.
    var onWipe: (@Sendable (_ allBytesWereZero: Bool) -> Void)?

    /// Allocates `count` zeroed secret bytes.
    ///
    /// - Throws: `SecureKeysError.Code.outOfMemory` when libsodium cannot allocate the guarded memory: the
    ///   process is out of memory or of memory mappings (each allocation is three: the bytes between two guard
    ///   pages), or `count` is larger than any allocation can be.
    public init(count: Int) throws {
        precondition(count >= 0, "SecureBytes count must not be negative")
        Sodium.ensureInitialised()
        self.count = count
        // sodium_malloc(0) is allowed but returns a pointer we must still free; allocate at least one byte so
        // the guard-page layout is the same for every key.
        let length = max(count, 1)
        if let spare = Self.spareBlocks.take(length: length) {
            self.pointer = spare
        } else {
            guard let memory = sodium_malloc(length) else {
                throw SecureKeysError.outOfMemory("libsodium could not allocate \(count) bytes of guarded memory for a key")
            }
            // sodium_malloc fills new memory with 0xdb; start from zero.
            sodium_memzero(memory, length)
            self.pointer = memory
        }
        Self.liveAllocations.add(1, ordering: .relaxed)
    }

    /// Copies `bytes` into guarded memory. The caller remains responsible for zeroing its own copy.
    ///
    /// - Throws: `SecureKeysError.Code.outOfMemory` when the guarded memory cannot be allocated.
    public convenience init(copying bytes: UnsafeRawBufferPointer) throws {
        try self.init(count: bytes.count)
        if let base = bytes.baseAddress, bytes.count > 0 {
            pointer!.copyMemory(from: base, byteCount: bytes.count)
        }
    }

    /// Copies the UTF-8 bytes of a passcode typed by a person into guarded memory.
    ///
    /// The `String` itself is the caller's and cannot be zeroed by Swift; keep it as short-lived as possible.
    ///
    /// - Throws: `SecureKeysError.Code.outOfMemory` when the guarded memory cannot be allocated.
    public convenience init(utf8 text: String) throws {
        var text = text
        let count = text.utf8.count
        try self.init(count: count)
        text.withUTF8 { bytes in
            if let base = bytes.baseAddress, count > 0 { pointer!.copyMemory(from: base, byteCount: count) }
        }
    }

    /// Fresh random secret bytes from `random` (the operating system's generator unless told otherwise).
    ///
    /// - Throws: `SecureKeysError.Code.outOfMemory` when the guarded memory cannot be allocated.
    public static func random(count: Int, using random: any RandomSource = SystemRandom()) throws -> SecureBytes {
        let bytes = try SecureBytes(count: count)
        bytes.unsafeWithMutableBytes { random.fill($0) }
        return bytes
    }

    deinit {
        releaseLocked()
    }

    /// How many guarded allocations this process holds now.
    ///
    /// Each is a `sodium_malloc` region with its guard pages, three memory mappings the kernel counts against
    /// `vm.max_map_count`. For tests that a long-running loop (a simulated seed, an agent) does not keep keys it
    /// no longer needs. The count is of values not wiped; besides them, up to 16 zeroed blocks that wiped values
    /// gave back wait for reuse.
    package static var liveAllocationCount: Int { liveAllocations.load(ordering: .relaxed) }

    private static let liveAllocations = Atomic<Int>(0)

    /// Whether ``wipe()`` has run.
    ///
    /// If so, the bytes are zeroed and released.
    public var isWiped: Bool {
        lock.lock()
        defer { lock.unlock() }
        return pointer == nil
    }

    /// Zeroes the bytes and gives the memory back now, instead of when the last reference goes away.
    public func wipe() {
        lock.lock()
        defer { lock.unlock() }
        releaseLocked()
    }

    /// Calls `body` with the secret bytes. Do not let the pointer escape `body`.
    ///
    /// - Throws: `SecureKeysError.Code.keyWiped` after ``wipe()``, or what `body` throws.
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) throws -> Result {
        lock.lock()
        defer { lock.unlock() }
        guard let pointer else { throw SecureKeysError.keyWiped() }
        return try body(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Calls `body` with the secret bytes, writable. Do not let the pointer escape `body`.
    ///
    /// - Throws: `SecureKeysError.Code.keyWiped` after ``wipe()``, or what `body` throws.
    public func withUnsafeMutableBytes<Result>(
        _ body: (UnsafeMutableRawBufferPointer) throws -> Result
    ) throws -> Result {
        lock.lock()
        defer { lock.unlock() }
        guard let pointer else { throw SecureKeysError.keyWiped() }
        return try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
    }

    /// Constant-time comparison (`sodium_memcmp`).
    ///
    /// A wiped value equals nothing.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        return (try? withUnsafeBytes { mine in
            try other.withUnsafeBytes { theirs in
                sodium_memcmp(mine.baseAddress!, theirs.baseAddress!, max(count, 0)) == 0
            }
        }) ?? false
    }

    /// For bytes this module just allocated and nobody else can have wiped yet.
    func unsafeWithMutableBytes<Result>(_ body: (UnsafeMutableRawBufferPointer) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(UnsafeMutableRawBufferPointer(start: pointer!, count: count))
    }

    private func releaseLocked() {
        guard let memory = pointer else { return }
        let length = max(count, 1)
        sodium_memzero(memory, length)
        onWipe?(sodium_is_zero(memory.assumingMemoryBound(to: UInt8.self), length) == 1)
        // Zeroed, the block waits for the next value of its length. For the block kept longest, when too many
        // wait, sodium_free zeroes once more, checks the canary and unmaps the guard pages.
        if let evicted = Self.spareBlocks.keep(memory, length: length) { sodium_free(evicted) }
        pointer = nil
        Self.liveAllocations.subtract(1, ordering: .relaxed)
    }

    /// Guarded blocks that wiped values gave back, zeroed, for the next values of the same length.
    ///
    /// A `sodium_malloc` and its `sodium_free` are nine system calls (the mapping, two guard pages, `mlock`,
    /// `madvise`, and their undoing), and a store's attach makes and wipes several short-lived keys (derived
    /// wrapping keys, a key's hexadecimal literal for SQLite). A block kept here stays between its guard pages
    /// and locked in memory, as it was; only its bytes are gone.
    private static let spareBlocks = SpareBlocks(capacity: 16)

    /// Frees the guarded blocks that wait for reuse, so the next values map memory of their own.
    ///
    /// For tests that limit the address space and expect an allocation to need a new mapping.
    package static func freeSpareBlocks() {
        while let block = spareBlocks.takeAny() { sodium_free(block) }
    }

    /// A bounded stack of zeroed guarded blocks, each with the length it was allocated for.
    final class SpareBlocks: Sendable {
        /// How many blocks wait at most, of all lengths together.
        let capacity: Int

        /// The blocks' addresses and lengths, the most recently kept last.
        private let blocks = LockedState<[(address: UInt, length: Int)]>([])

        /// An empty stack that keeps at most `capacity` blocks.
        init(capacity: Int) { self.capacity = capacity }

        /// The most recently kept block allocated for `length` bytes, taken off the stack, or `nil` when none waits.
        func take(length: Int) -> UnsafeMutableRawPointer? {
            let address = blocks.withLock { blocks -> UInt? in
                guard let index = blocks.lastIndex(where: { $0.length == length }) else { return nil }
                return blocks.remove(at: index).address
            }
            return address.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
        }

        /// Any block, taken off the stack, or `nil` when none waits.
        func takeAny() -> UnsafeMutableRawPointer? {
            blocks.withLock { $0.popLast()?.address }.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
        }

        /// Keeps the zeroed block `memory`, allocated for `length` bytes.
        ///
        /// - Returns: the block kept longest, when the stack was full: no longer kept, the caller frees it.
        func keep(_ memory: UnsafeMutableRawPointer, length: Int) -> UnsafeMutableRawPointer? {
            let evicted = blocks.withLock { blocks -> UInt? in
                blocks.append((UInt(bitPattern: memory), length))
                return blocks.count > capacity ? blocks.removeFirst().address : nil
            }
            return evicted.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
        }
    }
}

extension SecureBytes: CustomStringConvertible, CustomDebugStringConvertible {
    /// Only how many bytes there are, never the bytes.
    public var description: String { "SecureBytes(\(count) bytes, redacted)" }
    /// Redacted, like ``description``, with only the length.
    public var debugDescription: String { description }
}

/// Zeroes a temporary that held key material, with a call the optimiser may not remove (`sodium_memzero`).
public func secureZero(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress, buffer.count > 0 else { return }
    sodium_memzero(base, buffer.count)
}

/// Zeroes an array that held key material in place.
public func secureZero(_ array: inout [UInt8]) {
    array.withUnsafeMutableBytes { secureZero($0) }
}
