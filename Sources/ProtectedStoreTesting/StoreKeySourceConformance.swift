import Foundation
public import ProtectedStore
internal import ProtectedData
internal import SecureKeys

/// A conformance suite for a key source.
///
/// It runs the contract written on `StoreKeyProvider` against a source of the app's own (a keychain, a TPM, a secret
/// service, memory) and says which rules it breaks, as swift-metrics ships `MetricsTestKit` for the backends written
/// against it.
///
/// ```swift
/// import ProtectedStoreTesting
///
/// @Test func myKeySourceKeepsTheContract() async throws {
///     let source = try MyKeychainKeySource(service: "com.example.app.tests")
///     let failures = await StoreKeySourceConformance.check(
///         source, storesIn: temporaryFolder,
///         lock: { $0.lock() }, unlock: { try $0.unlock() })
///     #expect(failures.isEmpty, "\(failures)")
/// }
/// ```
///
/// The suite makes stores named `conformance-…` in the folder it is given (which must exist and be the
/// app's own), asks the source for their keys through the protocol only (it moves one, as a restore does),
/// and attaches one of them through the library's attach. It locks and unlocks the source through the closures it is given: `lock` must make
/// the keys of `protectionClass` unavailable at once (no grace period). It leaves the source unlocked.
public enum StoreKeySourceConformance: Sendable {
    /// One rule of the contract on `StoreKeyProvider`.
    public enum Rule: String, Sendable, CaseIterable, CustomStringConvertible {
        /// A store that was never created looks up as `absent`.
        ///
        /// The look-up says `absent` and the source records no key.
        case absentBeforeCreation = "absent-before-creation"
        /// Unlocked, the source makes a new store's key.
        ///
        /// The key is 32 bytes, not wiped.
        case createsAKey = "creates-a-key"
        /// The new key's record is right.
        ///
        /// It has its class, a 16-byte identifier and the current store format.
        case recordsTheNewKey = "records-the-new-key"
        /// The look-up gives back the key that was made.
        case looksUpTheSameKey = "looks-up-the-same-key"
        /// A second creation for a store that has a key throws and changes neither the key nor its record.
        case neverReplacesAKey = "never-replaces-a-key"
        /// Two stores get two keys with two identifiers.
        case oneKeyPerStore = "one-key-per-store"
        /// Locked, the look-up says `locked` with the store's class.
        ///
        /// Never `absent`, never the key.
        case lockedWhileLocked = "locked-while-locked"
        /// Locked, the source still records the key, unchanged.
        case recordsWhileLocked = "records-while-locked"
        /// Locked, a creation throws `protected-data-unavailable` and makes nothing.
        case neverMintsWhileLocked = "never-mints-while-locked"
        /// A key the source returned is the caller's.
        ///
        /// Locking the source does not wipe it.
        case neverWipesAReturnedKey = "never-wipes-a-returned-key"
        /// Unlocked again, the look-up gives the same key.
        case availableAfterUnlock = "available-after-unlock"
        /// A key moved to another store path is there, and gone from where it was.
        ///
        /// The move is `moveStoreKey(from:to:)`, what a restore does, and the key and its record stay the same. A move
        /// onto a store with a key is refused and changes neither.
        case movesAKey = "moves-a-key"
        /// A store works through the library's attach.
        ///
        /// A new store attaches, keeps what was written across an attach, waits (`protected-data-unavailable`) while
        /// locked, and a store whose file went missing is reported (`store-unavailable`), never made again empty.
        case attachesThroughTheLibrary = "attaches-through-the-library"

        /// The rule's kebab-case name.
        public var description: String { rawValue }
    }

    /// A rule the source broke, and what it did.
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        /// The rule broken.
        public var rule: Rule
        /// What the source did, in words, never a key.
        public var message: String

        /// `RULE: MESSAGE`.
        public var description: String { "\(rule): \(message)" }
    }

    /// Runs every ``Rule`` against `source` and returns the rules it breaks.
    ///
    /// The array is empty when it keeps the contract.
    ///
    /// - Parameters:
    ///   - source: the key source under test, unlocked or locked (the suite unlocks it first).
    ///   - folder: an existing folder of the app's own, where the suite's stores go (a few small files).
    ///   - protectionClass: the class of the suite's stores; `lock` must make it unavailable.
    ///   - lock: makes the keys of `protectionClass` unavailable now, with no grace period.
    ///   - unlock: makes them available again.
    /// - Returns: the failures, in the order of ``Rule``; a rule whose prerequisite failed is not checked.
    public static func check<Source: StoreKeyProvider>(
        _ source: Source, storesIn folder: String, protectionClass: ProtectionClass = .complete,
        lock: @Sendable (Source) async throws -> Void, unlock: @Sendable (Source) async throws -> Void
    ) async -> [Failure] {
        let run = Run(source: source, folder: folder, protectionClass: protectionClass)
        await run.checkAll(lock: { try await lock(source) }, unlock: { try await unlock(source) })
        return run.failures
    }

    /// The state of one run of the suite.
    private final class Run {
        let source: any StoreKeyProvider
        let folder: String
        let protectionClass: ProtectionClass
        var failures: [Failure] = []
        private let prefix = "conformance-\(UUID().uuidString.prefix(8))"

        init(source: any StoreKeyProvider, folder: String, protectionClass: ProtectionClass) {
            self.source = source
            self.folder = folder
            self.protectionClass = protectionClass
        }

        func store(_ name: String) -> String { "\(folder)/\(prefix)-\(name).sqlite" }

        func fail(_ rule: Rule, _ message: String) { failures.append(Failure(rule: rule, message: message)) }

        /// Runs `body`, recording what it throws as a failure of `rule`.
        ///
        /// Returns `nil` then.
        func attempt<Result>(_ rule: Rule, _ what: String, _ body: () throws -> Result) -> Result? {
            do {
                return try body()
            } catch {
                fail(rule, "\(what) threw \(Self.describe(error))")
                return nil
            }
        }

        static func describe(_ error: any Error) -> String {
            let wrapped = StoreError(wrapping: error)
            return "\(wrapped.code): \(wrapped.message)"
        }

        static func isProtectedDataUnavailable(_ error: any Error) -> Bool {
            StoreError(wrapping: error).code == .protectedDataUnavailable
        }

        func checkAll(lock: () async throws -> Void, unlock: () async throws -> Void) async {
            do {
                try await unlock()
            } catch {
                return fail(.createsAKey, "unlock, before the checks, threw \(Self.describe(error))")
            }
            let first = store("first")
            // Absent before creation.
            if let lookup = attempt(.absentBeforeCreation, "lookUpStoreKey for a store never created", { try source.lookUpStoreKey(forStoreAt: first) }) {
                if case .absent = lookup {} else {
                    if case .available(let key) = lookup { key.wipe() }
                    fail(.absentBeforeCreation, "lookUpStoreKey for a store never created said \(lookup), not absent")
                }
            }
            if let record = attempt(.absentBeforeCreation, "storeKeyRecord for a store never created", { try source.storeKeyRecord(forStoreAt: first) }),
                record != nil
            {
                fail(.absentBeforeCreation, "storeKeyRecord for a store never created gave a record")
            }
            // Creation.
            guard let created = attempt(.createsAKey, "createStoreKey, unlocked", { try source.createStoreKey(forStoreAt: first, protectionClass: protectionClass) })
            else { return }
            defer { created.wipe() }
            guard created.count == StoreKeyFile.storeKeyLength, !created.isWiped else {
                return fail(.createsAKey, "createStoreKey gave \(created.isWiped ? "a wiped key" : "a key of \(created.count) bytes"); a store key is \(StoreKeyFile.storeKeyLength) bytes")
            }
            // The suite's own copy, to compare with: what the source returned is checked on its own.
            guard let key = attempt(.createsAKey, "copying the new key", { try created.withUnsafeBytes { try SecureBytes(copying: $0) } })
            else { return }
            defer { key.wipe() }
            let record: StoreKeyRecord
            switch attempt(.recordsTheNewKey, "storeKeyRecord after createStoreKey", { try source.storeKeyRecord(forStoreAt: first) }) {
            case .none: return
            case .some(.none):
                return fail(.recordsTheNewKey, "storeKeyRecord after createStoreKey says the source holds no key (a source that keeps keys outside the library's key files implements storeKeyRecord(forStoreAt:))")
            case .some(.some(let found)): record = found
            }
            if record.protectionClass != protectionClass {
                fail(.recordsTheNewKey, "the record's class is \(record.protectionClass), the key was made for \(protectionClass)")
            }
            if record.storeID.count != StoreKeyFile.storeIDLength {
                fail(.recordsTheNewKey, "the record's identifier is \(record.storeID.count) bytes, not \(StoreKeyFile.storeIDLength)")
            }
            if record.storeFormat != .current {
                fail(.recordsTheNewKey, "a new key records \(record.storeFormat), not the current format \(StoreFormat.current)")
            }
            // The same key back.
            if let lookup = attempt(.looksUpTheSameKey, "lookUpStoreKey after createStoreKey", { try source.lookUpStoreKey(forStoreAt: first) }) {
                checkSameKey(lookup, as: key, rule: .looksUpTheSameKey, when: "after createStoreKey")
            }
            // Never replaced.
            do {
                let second = try source.createStoreKey(forStoreAt: first, protectionClass: protectionClass)
                second.wipe()
                fail(.neverReplacesAKey, "a second createStoreKey for a store with a key returned a key instead of throwing already-exists")
            } catch {}
            if let lookup = attempt(.neverReplacesAKey, "lookUpStoreKey after a second createStoreKey", { try source.lookUpStoreKey(forStoreAt: first) }) {
                checkSameKey(lookup, as: key, rule: .neverReplacesAKey, when: "after a second createStoreKey")
            }
            if let again = attempt(.neverReplacesAKey, "storeKeyRecord after a second createStoreKey", { try source.storeKeyRecord(forStoreAt: first) }),
                again != record
            {
                fail(.neverReplacesAKey, "the record changed after a second createStoreKey")
            }
            // One key per store.
            let other = store("second")
            var otherRecord: StoreKeyRecord?
            if let otherKey = attempt(.oneKeyPerStore, "createStoreKey for a second store", { try source.createStoreKey(forStoreAt: other, protectionClass: protectionClass) }) {
                if otherKey.constantTimeEquals(key) { fail(.oneKeyPerStore, "two stores were given the same key") }
                otherKey.wipe()
                if let found = attempt(.oneKeyPerStore, "storeKeyRecord for a second store", { try source.storeKeyRecord(forStoreAt: other) }) {
                    otherRecord = found
                    if found == nil {
                        fail(.oneKeyPerStore, "storeKeyRecord for a second store with a key says none")
                    } else if found?.storeID == record.storeID {
                        fail(.oneKeyPerStore, "two stores' keys have the same identifier")
                    }
                }
            }
            // Locked.
            let returned = attempt(.neverWipesAReturnedKey, "lookUpStoreKey before the lock", { try source.lookUpStoreKey(forStoreAt: first) })
            do {
                try await lock()
            } catch {
                return fail(.lockedWhileLocked, "lock threw \(Self.describe(error))")
            }
            if let lookup = attempt(.lockedWhileLocked, "lookUpStoreKey, locked", { try source.lookUpStoreKey(forStoreAt: first) }) {
                switch lookup {
                case .locked(let lockedClass) where lockedClass == protectionClass: break
                case .available(let leaked):
                    leaked.wipe()
                    fail(.lockedWhileLocked, "lookUpStoreKey, locked, gave the key")
                default:
                    fail(.lockedWhileLocked, "lookUpStoreKey, locked, said \(lookup), not locked (\(protectionClass.name))")
                }
            }
            if let lockedRecord = attempt(.recordsWhileLocked, "storeKeyRecord, locked", { try source.storeKeyRecord(forStoreAt: first) }),
                lockedRecord != record
            {
                fail(.recordsWhileLocked, lockedRecord == nil ? "storeKeyRecord, locked, says the source holds no key" : "storeKeyRecord, locked, gave another record")
            }
            let third = store("third")
            do {
                let minted = try source.createStoreKey(forStoreAt: third, protectionClass: protectionClass)
                minted.wipe()
                fail(.neverMintsWhileLocked, "createStoreKey, locked, made a key")
            } catch let error where Self.isProtectedDataUnavailable(error) {
            } catch {
                fail(.neverMintsWhileLocked, "createStoreKey, locked, threw \(Self.describe(error)), not protected-data-unavailable (the controller would present it instead of waiting)")
            }
            if case .available(let key) = returned {
                if key.isWiped { fail(.neverWipesAReturnedKey, "the key a look-up returned before the lock was wiped by the lock") }
            }
            // Unlocked again.
            do {
                try await unlock()
            } catch {
                return fail(.availableAfterUnlock, "unlock threw \(Self.describe(error))")
            }
            if let lookup = attempt(.availableAfterUnlock, "lookUpStoreKey after the unlock", { try source.lookUpStoreKey(forStoreAt: first) }) {
                checkSameKey(lookup, as: key, rule: .availableAfterUnlock, when: "after the unlock")
            }
            if case .available(let key) = returned { key.wipe() }
            if let lookup = attempt(.neverMintsWhileLocked, "lookUpStoreKey, after the unlock, for the store a locked creation was asked for", { try source.lookUpStoreKey(forStoreAt: third) }) {
                if case .absent = lookup {} else {
                    if case .available(let minted) = lookup { minted.wipe() }
                    fail(.neverMintsWhileLocked, "after a creation refused while locked, the look-up says \(lookup), not absent: a key was made")
                }
            }
            checkMove(first, key: key, record: record, onto: otherRecord.map { (other, $0) })
            await checkAttach(lock: lock, unlock: unlock)
        }

        /// Checks a move to a new store path and back, unlocked.
        ///
        /// A move onto `occupied` (a store with a key, when there is one) must be refused.
        func checkMove(_ storePath: String, key: SecureBytes, record: StoreKeyRecord, onto occupied: (path: String, record: StoreKeyRecord)?) {
            let rule = Rule.movesAKey
            let moved = store("moved")
            guard attempt(rule, "moveStoreKey to a store with no key", { try source.moveStoreKey(from: storePath, to: moved) }) != nil
            else { return }
            if let lookup = attempt(rule, "lookUpStoreKey where a key was moved from", { try source.lookUpStoreKey(forStoreAt: storePath) }) {
                if case .absent = lookup {} else {
                    if case .available(let left) = lookup { left.wipe() }
                    fail(rule, "after moveStoreKey, the look-up where the key was says \(lookup), not absent: the key is in two places")
                }
            }
            if let lookup = attempt(rule, "lookUpStoreKey where a key was moved to", { try source.lookUpStoreKey(forStoreAt: moved) }) {
                checkSameKey(lookup, as: key, rule: rule, when: "where a key was moved to")
            }
            if let movedRecord = attempt(rule, "storeKeyRecord where a key was moved to", { try source.storeKeyRecord(forStoreAt: moved) }),
                movedRecord != record
            {
                fail(rule, movedRecord == nil ? "after moveStoreKey, storeKeyRecord where the key was moved to says none" : "the moved key's record changed")
            }
            if let occupied {
                do {
                    try source.moveStoreKey(from: moved, to: occupied.path)
                    fail(rule, "moveStoreKey onto a store with a key did not throw already-exists")
                } catch {}
                if let lookup = attempt(rule, "lookUpStoreKey after a move onto a store with a key", { try source.lookUpStoreKey(forStoreAt: moved) }) {
                    checkSameKey(lookup, as: key, rule: rule, when: "after a refused move onto a store with a key")
                }
                if let kept = attempt(rule, "storeKeyRecord of a store a move was refused onto", { try source.storeKeyRecord(forStoreAt: occupied.path) }),
                    kept != occupied.record
                {
                    fail(rule, "a refused move onto a store with a key changed that store's record")
                }
            }
            guard attempt(rule, "moveStoreKey back", { try source.moveStoreKey(from: moved, to: storePath) }) != nil else { return }
            if let lookup = attempt(rule, "lookUpStoreKey after the move back", { try source.lookUpStoreKey(forStoreAt: storePath) }) {
                checkSameKey(lookup, as: key, rule: rule, when: "after the move back")
            }
        }

        /// Checks the library's attach over the source.
        ///
        /// It creates, writes, closes, attaches again and reads, then checks while locked, and with a lost store.
        func checkAttach(lock: () async throws -> Void, unlock: () async throws -> Void) async {
            let configuration = StoreConfiguration(path: store("attached"), protectionClass: protectionClass)
            let rule = Rule.attachesThroughTheLibrary
            do {
                let coordinator = try await StoreCoordinator.attach(configuration, keys: source)
                do {
                    try await coordinator.put("conformance", "kept")
                } catch {
                    await coordinator.close()
                    throw error
                }
                await coordinator.close()
                let again = try await StoreCoordinator.attach(configuration, keys: source)
                let value = try? await again.value(forKey: "conformance")
                await again.close()
                if value != "kept" { fail(rule, "a value written before a close read back as \(value ?? "nothing") at the next attach") }
            } catch {
                return fail(rule, "the attach of a new store threw \(Self.describe(error))")
            }
            do {
                try await lock()
                do {
                    let coordinator = try await StoreCoordinator.attach(configuration, keys: source)
                    await coordinator.close()
                    fail(rule, "the store attached while its source was locked")
                } catch let error where Self.isProtectedDataUnavailable(error) {
                } catch {
                    fail(rule, "the attach while locked threw \(Self.describe(error)), not protected-data-unavailable")
                }
                try await unlock()
            } catch {
                return fail(rule, "lock or unlock threw \(Self.describe(error))")
            }
            // A store whose file went missing while its key stayed: reported, never made again empty.
            let files = configuration.files
            let aside = files.database + ".aside"
            guard (try? FileManager.default.moveItem(atPath: files.database, toPath: aside)) != nil else {
                return fail(rule, "the suite could not move the store file aside in \(folder)")
            }
            defer {
                try? FileManager.default.removeItem(atPath: files.database)
                try? FileManager.default.moveItem(atPath: aside, toPath: files.database)
            }
            do {
                let coordinator = try await StoreCoordinator.attach(configuration, keys: source)
                await coordinator.close()
                fail(rule, "a store whose file is missing while its key exists attached (as a new, empty store)")
            } catch {
                let code = StoreError(wrapping: error).code
                if code != .storeUnavailable {
                    fail(rule, "a store whose file is missing while its key exists threw \(Self.describe(error)), not store-unavailable")
                }
            }
        }

        func checkSameKey(_ lookup: StoreKeyLookup, as key: SecureBytes, rule: Rule, when: String) {
            switch lookup {
            case .available(let found):
                if !found.constantTimeEquals(key) { fail(rule, "lookUpStoreKey \(when) gave another key") }
                found.wipe()
            default:
                fail(rule, "lookUpStoreKey \(when) said \(lookup), not available")
            }
        }
    }
}
