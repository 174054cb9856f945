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
/// it wraps each store's key. The source decides where keys live: both files are in the source's own
/// folder (`passphrase.keys` and `store-keys`), which the app keeps apart from its stores — nothing is
/// written beside a store, and the library reads no key file. While locked the class key is not in memory at
/// all: a store's key cannot be read or made, and the controller waits.
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
    /// The file that keeps every store's key, wrapped by the class key, with what the library needs of it
    /// (`StoreKeyRecord`).
    public let storeKeysPath: String
    private let kdf: PasscodeKDF
    private let salt: [UInt8]
    private let wrappedClassKey: [UInt8]
    private let state: Mutex<State>

    private struct State {
        var classKey: SecureBytes?
        var storeKeys: [String: StoreKeyEntry]
        var handlers: [Int: @Sendable (ProtectedDataEvent) -> Void] = [:]
        var nextHandler = 0
    }

    /// One store's key, wrapped by the class key, and its record.
    private struct StoreKeyEntry {
        var record: StoreKeyRecord
        var wrapped: [UInt8]
    }

    private static let magic = Array("PPKS".utf8)
    private static let associatedData = Array("PassphraseKeySource.class-key.v1".utf8)
    private static let storeKeysMagic = Array("PPSK".utf8)
    private static let wrappedStoreKeyLength = KeyWrap.wrappedLength(secretLength: StoreKeyFile.storeKeyLength)

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
        storeKeysPath = directory + "/store-keys"
        state = Mutex(State(storeKeys: try Self.readStoreKeys(at: storeKeysPath)))
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

    /// The store's key: `absent` when the source holds none, `locked` while the source is, `available`
    /// otherwise.
    ///
    /// - Throws: ``Failure/damaged(path:)`` when the class key does not unwrap the store's key.
    public func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup {
        try state.withLock { state in
            guard let entry = state.storeKeys[storePath] else { return .absent }
            guard let classKey = state.classKey else { return .locked(entry.record.protectionClass) }
            guard let key = try KeyWrap.unwrap(
                entry.wrapped[...], with: classKey, associatedData: Self.storeKeyAssociatedData(storePath, entry.record))
            else { throw Failure.damaged(path: storeKeysPath) }
            return .available(key)
        }
    }

    /// Makes a new store's key and keeps it, wrapped, in `store-keys` (durably, before it is returned); never
    /// over a key the source holds.
    ///
    /// - Throws: `StoreError.protectedDataUnavailable` while locked, so the controller waits for the unlock;
    ///   `already-exists` when the source holds a key for the store; ``Failure/cannotWrite(path:errno:)``.
    public func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes {
        try state.withLock { state in
            // "Not now", in the word the controller waits on (any other error is a failed attach).
            guard let classKey = state.classKey else { throw StoreError.protectedDataUnavailable(protectionClass) }
            guard storePath.utf8.count <= Int(UInt16.max) else {
                throw StoreError(code: .invalidArgument, message: "a store path of \(storePath.utf8.count) bytes; this source keeps paths of up to \(UInt16.max)")
            }
            guard state.storeKeys[storePath] == nil else {
                throw StoreError(code: .alreadyExists, message: "\(storeKeysPath) holds a key for \(storePath) already")
            }
            let record = StoreKeyRecord(
                storeID: SystemRandom().bytes(count: StoreKeyFile.storeIDLength), protectionClass: protectionClass,
                storeFormat: .current)
            let key = try SecureBytes.random(count: StoreKeyFile.storeKeyLength)
            do {
                let wrapped = try KeyWrap.wrap(key, with: classKey, associatedData: Self.storeKeyAssociatedData(storePath, record))
                var storeKeys = state.storeKeys
                storeKeys[storePath] = StoreKeyEntry(record: record, wrapped: wrapped)
                try Self.writeStoreKeys(storeKeys, to: storeKeysPath)
                state.storeKeys = storeKeys
            } catch {
                key.wipe()
                throw error
            }
            return key
        }
    }

    /// What the source keeps of the store's key beside it, or `nil` when it holds none; locked too.
    public func storeKeyRecord(forStoreAt storePath: String) throws -> StoreKeyRecord? {
        state.withLock { $0.storeKeys[storePath]?.record }
    }

    /// Moves a store's key to another store path (a restore puts the key it made for its staged store in
    /// place): unwrapped and wrapped again, bound to the new path, in one atomic write of `store-keys`.
    ///
    /// - Throws: `StoreError.protectedDataUnavailable` while locked; `already-exists` when `destination` has a
    ///   key; `store-unavailable` when `storePath` has none; ``Failure/cannotWrite(path:errno:)``.
    public func moveStoreKey(from storePath: String, to destination: String) throws {
        try state.withLock { state in
            guard let entry = state.storeKeys[storePath] else {
                throw StoreError(code: .storeUnavailable, message: "\(storeKeysPath) holds no key for \(storePath)")
            }
            guard state.storeKeys[destination] == nil else {
                throw StoreError(code: .alreadyExists, message: "\(storeKeysPath) holds a key for \(destination) already")
            }
            guard let classKey = state.classKey else { throw StoreError.protectedDataUnavailable(entry.record.protectionClass) }
            guard destination.utf8.count <= Int(UInt16.max) else {
                throw StoreError(code: .invalidArgument, message: "a store path of \(destination.utf8.count) bytes; this source keeps paths of up to \(UInt16.max)")
            }
            guard let key = try KeyWrap.unwrap(
                entry.wrapped[...], with: classKey, associatedData: Self.storeKeyAssociatedData(storePath, entry.record))
            else { throw Failure.damaged(path: storeKeysPath) }
            defer { key.wipe() }
            var storeKeys = state.storeKeys
            storeKeys[storePath] = nil
            storeKeys[destination] = StoreKeyEntry(
                record: entry.record,
                wrapped: try KeyWrap.wrap(key, with: classKey, associatedData: Self.storeKeyAssociatedData(destination, entry.record)))
            try Self.writeStoreKeys(storeKeys, to: storeKeysPath)
            state.storeKeys = storeKeys
        }
    }

    /// A wrapped store key is bound to its store's path and identifier.
    private static func storeKeyAssociatedData(_ storePath: String, _ record: StoreKeyRecord) -> [UInt8] {
        Array("PassphraseKeySource.store-key.v1".utf8) + Array(storePath.utf8) + record.storeID
    }

    // MARK: The store keys file

    /// `store-keys`: the magic, then one entry per store — path length (2 bytes, little-endian), path, store
    /// identifier, protection class, store format, wrapped key. No file: no keys yet.
    private static func readStoreKeys(at path: String) throws -> [String: StoreKeyEntry] {
        guard FileManager.default.fileExists(atPath: path) else { return [:] }
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        guard bytes.starts(with: storeKeysMagic) else { throw Failure.damaged(path: path) }
        var entries: [String: StoreKeyEntry] = [:]
        var offset = storeKeysMagic.count
        func take(_ count: Int) throws -> ArraySlice<UInt8> {
            guard offset + count <= bytes.count else { throw Failure.damaged(path: path) }
            defer { offset += count }
            return bytes[offset..<offset + count]
        }
        while offset < bytes.count {
            let length = try take(2).reversed().reduce(0) { $0 << 8 | Int($1) }
            guard let storePath = String(bytes: try take(length), encoding: .utf8),
                case let storeID = Array(try take(StoreKeyFile.storeIDLength)),
                let protectionClass = ProtectionClass(rawValue: try take(1).first!),
                let format = StoreFormat(recordedIdentifier: try take(1).first!)
            else { throw Failure.damaged(path: path) }
            let record = StoreKeyRecord(storeID: storeID, protectionClass: protectionClass, storeFormat: format)
            entries[storePath] = StoreKeyEntry(record: record, wrapped: Array(try take(wrappedStoreKeyLength)))
        }
        return entries
    }

    /// Replaces `store-keys` atomically: a new file, synced, renamed over the old one, the folder synced.
    private static func writeStoreKeys(_ entries: [String: StoreKeyEntry], to path: String) throws {
        var bytes = storeKeysMagic
        for (storePath, entry) in entries.sorted(by: { $0.key < $1.key }) {
            let pathBytes = Array(storePath.utf8)
            bytes += [UInt8(pathBytes.count & 0xff), UInt8(pathBytes.count >> 8)]
            bytes += pathBytes + entry.record.storeID
            bytes += [entry.record.protectionClass.rawValue, entry.record.storeFormat.identifier]
            bytes += entry.wrapped
        }
        let temporary = path + ".new"
        unlink(temporary)  // a write a crash cut short
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw Failure.cannotWrite(path: temporary, errno: errno) }
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress!, $0.count) }
        let synced = written == bytes.count && fsync(descriptor) == 0
        close(descriptor)
        guard synced, rename(temporary, path) == 0 else { throw Failure.cannotWrite(path: path, errno: errno) }
        let folder = open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw Failure.cannotWrite(path: path, errno: errno) }
        defer { close(folder) }
        guard fsync(folder) == 0 else { throw Failure.cannotWrite(path: path, errno: errno) }
    }
}
