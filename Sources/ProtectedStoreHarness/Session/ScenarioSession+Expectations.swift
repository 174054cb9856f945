import Foundation
import ProtectedData
import ProtectedStore
import SecureKeys

extension ScenarioSession {
    private var protectionClass: ProtectionClass {
        controller?.configuration.store.protectionClass
            ?? (try? StoreKeyFile.load(from: storeFiles.key).protectionClass) ?? .complete
    }

    /// How `expectation` failed against the session as it is now.
    ///
    /// Returns `nil` when it holds.
    func check(_ expectation: Expectation) async -> ExpectationFailure? {
        func compare(_ expected: String, _ got: String) -> ExpectationFailure? {
            // A value of a megabyte is shown by its start and its length, not printed whole.
            func shown(_ text: String) -> String { text.utf8.count <= 200 ? text : "\(text.prefix(80))… (\(text.utf8.count) bytes)" }
            return expected == got ? nil : ExpectationFailure(expected: shown(expected), got: shown(got))
        }
        switch expectation {
        case .protectedData(let available):
            let got = deviceFacts.map { $0.availability.isAvailable(protectionClass) ? "available" : "unavailable" } ?? "no device"
            return compare("protected-data \(available ? "available" : "unavailable")", "protected-data \(got)")
        case .store(let state):
            return compare("store \(state)", "store \(controller?.phase.name ?? "not-running")")
        case .coordinator(let assigned):
            return compare("coordinator \(assigned ? "assigned" : "nil")", "coordinator \(controller?.coordinator == nil ? "nil" : "assigned")")
        case .interaction(let enabled):
            let got = controller.map { $0.isInteractionEnabled ? "enabled" : "disabled" } ?? "no app running"
            return compare("interaction \(enabled ? "enabled" : "disabled")", "interaction \(got)")
        case .queued(let count):
            return compare("queued \(count)", "queued \(controller?.queuedOperationCount ?? 0)")
        case .ran(let names):
            return compare("ran [\(names.joined(separator: " "))]", "ran [\(ran.joined(separator: " "))]")
        case .value(let key, let value):
            return compare("value \(quoted(key)) = \(ScenarioValue.words(value))", "value \(quoted(key)) \(await readValue(key))")
        case .missing(let key):
            return compare("missing \(key)", (await readValue(key)) == "missing" ? "missing \(key)" : "value \(key) \(await readValue(key))")
        case .error(let code):
            return compare("error \(code)", "error \(lastError?.code.name ?? "none")")
        case .presentedError(let code):
            return compare("presented-error \(code)", "presented-error \(controller?.presentedError?.code.name ?? "none")")
        case .device(let state):
            return compare("device \(state)", "device \(deviceStateWord)")
        case .integrityOK:
            guard let coordinator = controller?.coordinator else {
                return compare("integrity ok", "integrity unknown (store \(controller?.phase.name ?? "not-running"), no coordinator)")
            }
            let result: String
            do {
                result = try await coordinator.read { try $0.integrityCheck() }.joined(separator: "; ")
            } catch {
                result = "\(error)"
            }
            return compare("integrity ok", "integrity \(result)")
        case .noPlaintext:
            return compare("no plaintext in the state directory", plaintextFindings().first ?? "no plaintext in the state directory")
        case .inbox(let count):
            let got: String
            do {
                got = String(try inbox.pendingCount())
            } catch {
                got = "unreadable (\(StoreError(wrapping: error).code.name))"
            }
            return compare("inbox \(count)", "inbox \(got)")
        case .inboxDamaged(let bytes):
            let got = (try? inbox.damagedByteCount()).map(String.init) ?? "unreadable"
            return compare("inbox-damaged \(bytes)", "inbox-damaged \(got)")
        case .quarantined(let count):
            guard let coordinator = controller?.coordinator else {
                return compare("quarantined \(count)", "quarantined unknown (store \(controller?.phase.name ?? "not-running"), no coordinator)")
            }
            let got = (try? await coordinator.quarantinedInboxRecords().count).map(String.init) ?? "unreadable"
            return compare("quarantined \(count)", "quarantined \(got)")
        }
    }

    /// Files in the state directory (but the simulated secure element, `hardware/`, and the lock file) that
    /// contain a value written in this session, or SQLite's plaintext header.
    public func plaintextFindings() -> [String] {
        plaintextFindings(of: writtenValues.filter { $0.utf8.count >= 6 })
    }

    /// Files in the state directory (but `hardware/` and the lock file) that contain any of `needles`, or
    /// SQLite's header.
    ///
    /// - Parameters:
    ///   - needles: the texts to look for.
    ///   - onlyChanged: skip files whose size and modification time are what they were at the
    ///     previous call with the same needles (the simulator calls this after every step).
    public func plaintextFindings(of needles: some Collection<String>, onlyChanged: Bool = false) -> [String] {
        let patterns = needles.map { Array($0.utf8) } + [Array("SQLite format 3".utf8)]
        // The lock file holds the owner's process id, which a written value of digits could contain. The shell's
        // history holds what was typed at its prompt, values included, as a shell's history does: no file of the
        // store or the device.
        return plaintextScanner.findings(of: patterns, under: stateDirectory, onlyChanged: onlyChanged) { name in
            name.hasPrefix("hardware/") || name == StateDirectoryLock.fileName || name == Self.shellHistoryFileName
        }
    }

    /// `= VALUE`, `missing`, or why it cannot be read now.
    private func readValue(_ key: String) async -> String {
        guard let coordinator = controller?.coordinator else {
            return "unreadable (store \(controller?.phase.name ?? "not-running"), no coordinator)"
        }
        do {
            return try await coordinator.value(forKey: key).map { "= \(ScenarioValue.words($0))" } ?? "missing"
        } catch {
            return "unreadable (\(error))"
        }
    }
}
