internal import CSodium
import StoreConcurrency


/// Where fresh keys, salts and nonces come from.
///
/// Production code uses ``SystemRandom``. ``SeededRandom`` exists so that known-answer vectors and the
/// deterministic simulation can reproduce files byte for byte; never use it for real data.
public protocol RandomSource: Sendable {
    /// Fills `buffer` with random bytes.
    func fill(_ buffer: UnsafeMutableRawBufferPointer)
}

extension RandomSource {
    /// Random bytes that are not secret (salts, nonces, identifiers).
    public func bytes(count: Int) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        result.withUnsafeMutableBytes { fill($0) }
        return result
    }
}

/// The operating system's generator, through `randombytes_buf`.
public struct SystemRandom: RandomSource {
    /// The generator.
    ///
    /// libsodium is initialised first.
    public init() { Sodium.ensureInitialised() }

    public func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        randombytes_buf(base, buffer.count)
    }
}

/// A reproducible stream for tests, known-answer vectors and seeded simulation only.
///
/// The same seed gives the same bytes. Each call to ``fill(_:)`` draws the next block with
/// `randombytes_buf_deterministic`, keyed by BLAKE2b(seed, call counter), so interleaved sizes still reproduce
/// exactly.
public final class SeededRandom: RandomSource {
    private let seed: [UInt8]
    private let counter = LockedState<UInt64>(0)

    /// - Parameter seed: any bytes; they are hashed to the 32-byte seed libsodium takes.
    public init(seed: [UInt8]) {
        Sodium.ensureInitialised()
        var digest = [UInt8](repeating: 0, count: 32)
        _ = crypto_generichash(&digest, 32, seed, UInt64(seed.count), nil, 0)
        self.seed = digest
    }

    /// A convenience for simulations numbered by an integer seed.
    public convenience init(seed: UInt64) {
        self.init(seed: withUnsafeBytes(of: seed.littleEndian) { Array($0) })
    }

    public func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        let call = counter.withLock { count -> UInt64 in
            count += 1
            return count
        }
        var blockSeed = [UInt8](repeating: 0, count: 32)
        var message = withUnsafeBytes(of: call.littleEndian) { Array($0) }
        _ = crypto_generichash(&blockSeed, 32, &message, UInt64(message.count), seed, seed.count)
        randombytes_buf_deterministic(base, buffer.count, blockSeed)
        secureZero(&blockSeed)
    }
}
