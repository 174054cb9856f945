import Foundation
import ProtectedStore
import Synchronization

/// A key source that keeps store keys in memory only, written against `ProtectedStore`'s public API: no
/// file anywhere. Locked, it gives no key and makes none; its keys stay (as a keychain keeps them).
///
/// `rules` turns on a broken behaviour, for the tests that show the conformance suite names it.
final class MemoryKeySource: KeyAvailabilityMonitor, StoreKeyProvider {
    /// A rule of the contract this source breaks on purpose.
    enum Breakage: Hashable {
        /// Records nothing of its keys (the default `storeKeyRecord`, which reads a key file that is not there).
        case recordsNothing
        /// Makes a key while locked.
        case mintsWhileLocked
        /// Says `absent` while locked.
        case absentWhileLocked
        /// Wipes the keys it returned when it locks.
        case wipesReturnedKeys
        /// Copies a key it is asked to move: the key stays where it was too.
        case copiesOnMove
    }

    private struct Entry {
        let key: SecureBytes
        let record: StoreKeyRecord
    }

    private struct State {
        var locked = false
        var entries: [String: Entry] = [:]
        var returned: [SecureBytes] = []
        var handlers: [Int: @Sendable (ProtectedDataEvent) -> Void] = [:]
        var nextHandler = 0
    }

    private let state = Mutex(State())
    let breakages: Set<Breakage>

    init(breaking breakages: Set<Breakage> = []) { self.breakages = breakages }

    deinit {
        state.withLock { state in
            for entry in state.entries.values { entry.key.wipe() }
        }
    }

    var isLocked: Bool { state.withLock { $0.locked } }

    /// Locks: no key is given or made until ``unlock()``; subscribers hear *will*, then *did become unavailable*.
    func lock() {
        guard !isLocked else { return }
        deliver(.willBecomeUnavailable) { _ in }
        deliver(.didBecomeUnavailable) { state in
            state.locked = true
            if self.breakages.contains(.wipesReturnedKeys) { for key in state.returned { key.wipe() } }
            state.returned = []
        }
    }

    /// Unlocks; subscribers hear *did become available*.
    func unlock() {
        guard isLocked else { return }
        deliver(.didBecomeAvailable) { $0.locked = false }
    }

    private func deliver(_ event: ProtectedDataEvent, changing change: (inout State) -> Void) {
        let handlers = state.withLock { state in
            change(&state)
            return state.handlers.sorted { $0.key < $1.key }.map(\.value)
        }
        for handler in handlers { handler(event) }
    }

    // MARK: KeyAvailabilityMonitor

    func isProtectedDataAvailable(for protectionClass: ProtectionClass) -> Bool { !isLocked }

    func subscribe(
        _ handler: @escaping @Sendable (ProtectedDataEvent) -> Void
    ) -> (availability: ProtectedDataAvailability, subscription: EventSubscription) {
        state.withLock { state in
            let id = state.nextHandler
            state.nextHandler += 1
            state.handlers[id] = handler
            let subscription = EventSubscription(onCancel: { [weak self] in
                _ = self?.state.withLock { $0.handlers.removeValue(forKey: id) }
            })
            let available: Set<ProtectionClass> = state.locked ? [] : Set(ProtectionClass.allCases)
            return (ProtectedDataAvailability(availableClasses: available), subscription)
        }
    }

    // MARK: StoreKeyProvider

    func lookUpStoreKey(forStoreAt storePath: String) throws -> StoreKeyLookup {
        try state.withLock { state in
            guard let entry = state.entries[storePath] else { return .absent }
            if state.locked {
                return breakages.contains(.absentWhileLocked) ? .absent : .locked(entry.record.protectionClass)
            }
            return .available(try handOut(entry.key, in: &state))
        }
    }

    func createStoreKey(forStoreAt storePath: String, protectionClass: ProtectionClass) throws -> SecureBytes {
        try state.withLock { state in
            if state.locked && !breakages.contains(.mintsWhileLocked) {
                throw StoreError.protectedDataUnavailable(protectionClass)
            }
            guard state.entries[storePath] == nil else {
                throw StoreError(code: .alreadyExists, message: "the memory source holds a key for \(storePath)")
            }
            let key = try SecureBytes.random(count: StoreKeyFile.storeKeyLength)
            let storeID = try SecureBytes.random(count: StoreKeyFile.storeIDLength).withUnsafeBytes { Array($0) }
            state.entries[storePath] = Entry(
                key: key, record: StoreKeyRecord(storeID: storeID, protectionClass: protectionClass, storeFormat: .current))
            return try handOut(key, in: &state)
        }
    }

    func storeKeyRecord(forStoreAt storePath: String) throws -> StoreKeyRecord? {
        guard !breakages.contains(.recordsNothing) else { return try StoreKeyRecord.ofKeyFile(forStoreAt: storePath) }
        return state.withLock { $0.entries[storePath]?.record }
    }

    func moveStoreKey(from storePath: String, to destination: String) throws {
        try state.withLock { state in
            guard let entry = state.entries[storePath] else {
                throw StoreError(code: .storeUnavailable, message: "the memory source holds no key for \(storePath)")
            }
            guard state.entries[destination] == nil else {
                throw StoreError(code: .alreadyExists, message: "the memory source holds a key for \(destination)")
            }
            state.entries[destination] = entry
            if !breakages.contains(.copiesOnMove) { state.entries[storePath] = nil }
        }
    }

    /// A copy of `key` for the caller, who owns it.
    private func handOut(_ key: SecureBytes, in state: inout State) throws -> SecureBytes {
        let copy = try key.withUnsafeBytes { try SecureBytes(copying: $0) }
        if breakages.contains(.wipesReturnedKeys) { state.returned.append(copy) }
        return copy
    }
}
