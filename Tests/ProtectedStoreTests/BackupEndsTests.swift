import TestSupport
import EncryptedSQLite
import Foundation
import ProtectedData
import SecureKeys
import Testing

#if canImport(Glibc)
import Glibc
#endif

@_spi(Testing) @testable import ProtectedStore

/// Backup, export and the inbox at their ends, through the library: a target inside the store's state
/// directory, the inbox's record limit as the README states it, the words of an unusable inbox's report.
@Suite("Backup, export and inbox at their ends", .serialized)
struct BackupEndsTests {
    @Test("a backup (even replacing) or an export aimed at the state directory, a file of it or a new name inside it is invalid-argument, and the store and its keys are unchanged")
    func targetInsideStateDirectoryIsRefused() async throws {
        let fixture = FaultFixture()
        try fixture.setUpDevice()
        try fixture.unlock()
        let (_, recoveryKey) = try RecoveryKey.create(kdf: .minimal)
        let outside = TemporaryDirectory()
        let link = outside.file("link-to-keybag")
        #expect(symlink(fixture.keybagPath, link) == 0)
        let targets = [
            fixture.files.key, fixture.storePath, fixture.keybagPath, fixture.deviceKeyPath, fixture.root,
            fixture.root + "/new.backup", fixture.root + "/device/../app.sqlite.key", link,
        ]
        try await fixture.withStore { coordinator in
            try await fixture.put("alpha", "one", in: coordinator)
            // The keys, byte for byte, and the names in the state directory (the store file and its log may be
            // checkpointed meanwhile; the store's values are checked after a reboot below).
            func keysAndNames() -> [String: [UInt8]?] {
                var found = BackupFaultSweepTests.contents(of: fixture.root)
                for name in found.keys where !name.hasSuffix(".key") && !name.hasSuffix(".keybag") { found[name] = .some(nil) }
                return found
            }
            let before = keysAndNames()
            for target in targets {
                await #expect("backup to \(target)") {
                    _ = try await coordinator.backup(to: target, recoveryKey: recoveryKey, replacingExisting: true)
                } throws: { code(of: $0) == .invalidArgument && "\(StoreError(wrapping: $0))".contains("state directory") }
                await #expect("export to \(target)") {
                    try await coordinator.export(to: target, encryption: .plaintext)
                } throws: { code(of: $0) == .invalidArgument }
                await #expect("export without attaching to \(target)") {
                    try await StoreCoordinator.export(fixture.configuration, keys: fixture.device!, to: target, encryption: .plaintext)
                } throws: { code(of: $0) == .invalidArgument }
            }
            let after = keysAndNames()
            #expect(after.keys.sorted() == before.keys.sorted(), "no file was added or removed in the state directory")
            #expect(after == before, "no key changed")
            _ = try await coordinator.backup(to: outside.file("app.backup"), recoveryKey: recoveryKey)
            try await coordinator.export(to: outside.file("app.export"), encryption: .plaintext)
        }
        try fixture.reboot(cut: false)
        try fixture.unlock()
        try await fixture.withStore { coordinator in
            let value = try await coordinator.value(forKey: "alpha")
            #expect(value == "one")
        }
    }

    /// The README's limit on an inbox record: its payload's size and the bytes of a put's own fields.
    static func readmeInboxLimit() throws -> (payload: Int, putFields: Int) {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8).replacingOccurrences(of: "\n", with: " ")
        let pattern = try NSRegularExpression(
            pattern: "An append over 4 MiB \\(([0-9,]+) bytes of payload: the value, key and kind plus ([0-9]+) bytes of the record's own fields for a `put`")
        let match = try #require(pattern.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)))
        let payload = try #require(Int(text[Range(match.range(at: 1), in: text)!].replacingOccurrences(of: ",", with: "")))
        let fields = try #require(Int(text[Range(match.range(at: 2), in: text)!]))
        return (payload, fields)
    }

    @Test("the inbox's record limit is what the README states: the largest put it accepts and the smallest it refuses (key k)")
    func inboxLimitIsAsDocumented() throws {
        let (payload, fields) = try Self.readmeInboxLimit()
        let largest = payload - fields - "put".utf8.count - "k".utf8.count
        let fixture = try InboxFixture()
        _ = try fixture.inbox.append(.put(key: "k", value: String(repeating: "x", count: largest)))
        let before = try fixture.inbox.pendingCount()
        let error = #expect(throws: StoreError.self) {
            _ = try fixture.inbox.append(.put(key: "k", value: String(repeating: "x", count: largest + 1)))
        }
        #expect(error?.code == .inboxRecordTooLarge)
        #expect(error?.message.contains("plus \(fields) bytes of the record's own fields") == true, "\(String(describing: error))")
        #expect(try fixture.inbox.pendingCount() == before, "nothing of the refused record was written")
    }

    @Test("an unusable inbox (a FIFO) is reported by the merge saying once that it was left as it is")
    func unusableInboxSaysLeftOnce() throws {
        let fixture = try InboxFixture()
        #expect(mkfifo(fixture.inbox.inboxPath, 0o600) == 0)
        var applied: [String] = []
        let report = try fixture.merge(counting: &applied)
        let problem = try #require(report.problems.first)
        let words = "\(problem)"
        #expect(words.contains("FIFO"), "\(words)")
        #expect(words.components(separatedBy: "left as it is").count == 2, "said once: \(words)")
    }
}
