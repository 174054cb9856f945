import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
public import ProtectedStore
public import SecureKeys
import Synchronization

/// A source of keys an app writes itself, for a platform with no Data Protection of its own: the user's
/// passphrase unlocks it, the app locks it (at a screen lock, after idle time, at a menu item), and it serves
/// a `DataController` exactly as the simulated device does.
///
/// Its key hierarchy is the library's, smaller: one random 32-byte *class key* serves every protection
/// class; it is kept wrapped (XChaCha20-Poly1305) under `Argon2id(passphrase, salt)` in `passphrase.keys`, and
/// it wraps each store's key in the store's ordinary key file (`StoreKeyFile`). While locked the class key
/// is not in memory at all: a store's key cannot be read, and the controller waits.
///
/// Lock and unlock are called on the main actor, so events reach subscribers in the order they happened.
public final class PassphraseKeySource: KeyAvailabilityMonitor, StoreKeyProvider {
    /// What can go wrong with the source itself.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The passphrase did not unwrap the class key.
        case wrongPassphrase
        /// `passphrase.keys` is not a file this source wrote (truncated, altered, another format).
        case damaged(path: String)
        /// `passphrase.keys` could not be created (it exists already, or the folder refused it).
        case cannotWrite(path: String, errno: Int32)

        /// The failure in words; never the passphrase.
        public var description: String {
            switch self {
            case .wrongPassphrase: "wrong passphrase"
            case .damaged(let path): "\(path) is damaged or not a passphrase key file"
            case .cannotWrite(let path, let code): "cannot create \(path): \(String(cString: strerror(code)))"
            }
        }
    }

    /// The file that keeps the wrapped class key.
    public let keyFilePath: String
    private let kdf: PasscodeKDF
    private let salt: [UInt8]
    private let wrappedClassKey: [UInt8]
    private let state = Mutex(State())

    private struct State {
        var classKey: SecureBytes?
        var handlers: [Int: @Sendable (ProtectedDataEvent) -> Void] = [:]
        var nextHandler = 0
    }

    private static let magic = Array("PPKS".utf8)
    private static let associatedData = Array("PassphraseKeySource.class-key.v1".utf8)

    /// Creates the source's key file in `directory` (which must exist) and returns the source, locked.
    ///
    /// - Parameters:
    ///   - directory: where `passphrase.keys` goes.
    ///   - passphrase: the user's passphrase, in guarded memory.
    ///   - kdf: Argon2id's cost; `.default` in an app.
    /// - Throws: a `SecureKeysError` when the key cannot be made, or the file exists or cannot be written.
    public static func create(
        in directory: String, passphrase: SecureBytes, kdf: PasscodeKDF = .default
    ) throws -> PassphraseKeySource {
        let salt = SystemRandom().bytes(count: PasscodeKDF.saltLength)
        let wrappingKey = try kdf.deriveKey(from: passphrase, salt: salt)
        defer { wrappingKey.wipe() }
        let classKey = try SecureBytes.random(count: KeyWrap.keyLength)
        defer { classKey.wipe() }
        var bytes = magic
        bytes += withUnsafeBytes(of: kdf.opsLimit.littleEndian, Array.init)
        bytes += withUnsafeBytes(of: kdf.memLimit.littleEndian, Array.init)
        bytes += salt
        bytes += try KeyWrap.wrap(classKey, with: wrappingKey, associatedData: associatedData)
        let path = directory + "/passphrase.keys"
        // O_EXCL: never over an existing file, which would orphan every store its class key wraps.
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure.cannotWrite(path: path, errno: errno) }
        defer { close(descriptor) }
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress!, $0.count) }
        guard written == bytes.count, fsync(descriptor) == 0 else { throw Failure.cannotWrite(path: path, errno: errno) }
        // The new name is durable only once its folder is synced.
        let folder = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw Failure.cannotWrite(path: path, errno: errno) }
        defer { close(folder) }
        guard fsync(folder) == 0 else { throw Failure.cannotWrite(path: path, errno: errno) }
        return try PassphraseKeySource(directory: directory)
    }

    /// Opens the source kept in `directory`, locked.
    ///
    /// - Throws: ``Failure/damaged(path:)`` for a file this source did not write; a file-system error when
    ///   it cannot be read.
    public init(directory: String) throws {
        keyFilePath = directory + "/passphrase.keys"
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: keyFilePath)))
        let header = Self.magic.count + 16 + PasscodeKDF.saltLength
        guard bytes.count == header + KeyWrap.wrappedLength(secretLength: KeyWrap.keyLength),
            Array(bytes.prefix(Self.magic.count)) == Self.magic
        else { throw Failure.damaged(path: keyFilePath) }
        func integer(at offset: Int) -> UInt64 {
            bytes[offset..<offset + 8].reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        kdf = PasscodeKDF(opsLimit: integer(at: 4), memLimit: integer(at: 12))
        guard kdf.isValid else { throw Failure.damaged(path: keyFilePath) }
        salt = Array(bytes[20..<header])
        wrappedClassKey = Array(bytes[header...])
    }

    deinit { state.withLock { $0.classKey?.wipe() } }

    // MARK: The app's lock

    /// Unwraps the class key with the passphrase (Argon2id: tens of milliseconds) and tells every subscriber
    /// that protected data became available. Unlocking an unlocked source changes nothing.
    ///
    /// - Throws: ``Failure/wrongPassphrase``.
    @MainActor
    public func unlock(passphrase: SecureBytes) throws {
        guard state.withLock({ $0.classKey == nil }) else { return }
        let wrappingKey = try kdf.deriveKey(from: passphrase, salt: salt)
        defer { wrappingKey.wipe() }
        guard let classKey = try KeyWrap.unwrap(wrappedClassKey[...], with: wrappingKey, associatedData: Self.associatedData)
        else { throw Failure.wrongPassphrase }
        deliver(.didBecomeAvailable) { $0.classKey = classKey }
    }

    /// Wipes the class key now (no grace period) and tells every subscriber: *will become unavailable*, then
    /// *did become unavailable*. Locking a locked source changes nothing.
    @MainActor
    public func lock() {
        guard state.withLock({ $0.classKey != nil }) else { return }
        deliver(.willBecomeUnavailable) { _ in }
        deliver(.didBecomeUnavailable) { state in
            state.classKey?.wipe()
            state.classKey = nil
        }
    }

    /// Whether the source is unlocked.
    public var isUnlocked: Bool { state.withLock { $0.classKey != nil } }

    /// Changes the state under the lock, then calls every handler (outside it, so a handler may ask the
    /// source anything).
    private func deliver(_ event: ProtectedDataEvent, changing change: (inout State) -> Void) {
        let handlers = state.withLock { state in
            change(&state)
            return state.handlers.sorted { $0.key < $1.key }.map(\.value)
        }
        for handler in handlers { handler(event) }
    }

    // MARK: KeyAvailabilityMonitor

    /// Every class is available exactly while the source is unlocked.
    public func isProtectedDataAvailable(for protectionClass: ProtectionClass) -> Bool { isUnlocked }

    /// Registers `handler`, atomically with reading the availability.
    public func subscribe(
        _ handler: @escaping @Sendable (ProtectedDataEvent) -> Void
    ) -> (availability: ProtectedDataAvailability, subscription: EventSubscription) {
        state.withLock { state in
            let id = state.nextHandler
            state.nextHandler += 1
            state.handlers[id] = handler
            let available: Set<ProtectionClass> = state.classKey == nil ? [] : Set(ProtectionClass.allCases)
            let subscription = EventSubscription(onCancel: { [weak self] in
                _ = self?.state.withLock { $0.handlers.removeValue(forKey: id) }
            })
            return (ProtectedDataAvailability(availableClasses: available), subscription)
        }
    }

    // MARK: StoreKeyProvider

    /// The store's key: `absent` without a key file, `locked` while the source is, `available` otherwise.
    public func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup {
        let keyPath = StoreFiles(database: storePath).key
        guard FileManager.default.fileExists(atPath: keyPath) else { return .absent }
        let file = try StoreKeyFile.load(from: keyPath)
        return try state.withLock { state in
            guard let classKey = state.classKey else { return .locked(file.protectionClass) }
            return .available(try file.unwrap(with: classKey, path: keyPath))
        }
    }

    /// Creates a new store's key file (never over an existing one, never beside an existing store).
    ///
    /// - Throws: `StoreError.protectedDataUnavailable` while locked, so the controller waits for the unlock.
    public func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes {
        try state.withLock { state in
            // "Not now", in the word the controller waits on (any other error is a failed attach).
            guard let classKey = state.classKey else { throw StoreError.protectedDataUnavailable(protectionClass) }
            return try StoreKeyFile.create(
                at: StoreFiles(database: storePath).key, forStoreAt: storePath, protectionClass: protectionClass,
                classKey: classKey)
        }
    }
}
