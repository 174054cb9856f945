import Foundation
import ProtectedData
import SecureKeys
import TestSupport
import Testing

@_spi(Testing) @testable import ProtectedStore

@Suite("StoreError")
struct StoreErrorTests {
    @Test("the README's error table lists every code StoreError defines")
    func readmeListsEveryCode() throws {
        let readme = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("README.md")
        let text = try String(contentsOf: readme, encoding: .utf8)
        guard let table = text.components(separatedBy: "## Errors").dropFirst().first?.components(separatedBy: "\n## ").first else {
            Issue.record("README.md has no Errors section")
            return
        }
        let listed = Set(table.split(separator: "\n").filter { $0.hasPrefix("| `") }.flatMap { row in
            row.split(separator: "|").first.map { cell in
                cell.split(separator: "`").enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
            } ?? []
        })
        let missing = StoreError.Code.all.map(\.name).filter { !listed.contains($0) }
        #expect(missing.isEmpty, "codes missing from README.md's error table: \(missing)")
        #expect(Set(StoreError.Code.all.map(\.name)).count == StoreError.Code.all.count, "a code is defined twice")
    }

    @Test("every code any layer defines (StoreErrors, SecureKeys, ProtectedData) is in StoreError.Code.all and in the README's error table")
    func everyLayersCodeIsListed() throws {
        let defined = Set(try Self.codeDeclarations().map(\.word))
        #expect(defined.count >= 40, "the scan found too few codes to be reading the sources: \(defined.sorted())")
        let known = Set(StoreError.Code.all.map(\.name))
        #expect(defined.subtracting(known).isEmpty, "codes StoreError.Code.all lacks: \(defined.subtracting(known).sorted())")
        #expect(known.subtracting(defined).isEmpty, "codes in StoreError.Code.all the scan did not find: \(known.subtracting(defined).sorted())")
        let readme = try String(contentsOf: Self.root.appendingPathComponent("README.md"), encoding: .utf8)
        let table = try #require(readme.components(separatedBy: "## Errors").dropFirst().first?.components(separatedBy: "\n## ").first)
        let missing = defined.filter { !table.contains("`\($0)`") }
        #expect(missing.isEmpty, "codes missing from README.md's error table: \(missing.sorted())")
    }

    @Test("each code word is declared once in Sources, in one code type that every layer's error uses")
    func eachCodeIsDeclaredOnce() throws {
        let declarations = try Self.codeDeclarations()
        let places = Dictionary(grouping: declarations, by: \.word).filter { $0.value.count > 1 }
        #expect(places.isEmpty, "code words declared more than once: \(places.mapValues { $0.map(\.file) }.sorted { $0.key < $1.key })")
        // The lower layers' errors carry the one code type, so wrapping copies the code rather than its name.
        let keys: SecureKeysError.Code = .wrongPasscode
        let device: DeviceError.Code = .wrongPasscode
        let store: StoreError.Code = keys
        #expect(store == device && StoreError(wrapping: SecureKeysError.wrongPasscode()).code == .wrongPasscode)
        #expect(StoreError(wrapping: DeviceError(code: .noBus, message: "gone")).code == .noBus)
    }

    private static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// Every code word declared in Sources: a static member built from a kebab-case string (`Code("…")`,
    /// `Self("…")`, `DeviceError.Code("…")`), or a case of a private raw-value enum of codes (`case x = "…"`
    /// inside a `Code`), with the file that declares it.
    private static func codeDeclarations() throws -> [(word: String, file: String)] {
        let sources = root.appendingPathComponent("Sources")
        let files = try #require(FileManager.default.enumerator(atPath: sources.path)).compactMap { $0 as? String }
            .filter { $0.hasSuffix(".swift") }
        let member = #/static let \w+ = (?:[\w.]*Code|Self)\("([a-z0-9-]+)"\)/#
        let enumCase = #/case \w+ = "([a-z0-9-]+)"/#
        var found: [(word: String, file: String)] = []
        for file in files {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for match in text.matches(of: member) { found.append((String(match.output.1), file)) }
            if let base = text.range(of: "private enum Base: String") {
                let block = text[base.lowerBound...].prefix { $0 != "}" }
                for match in block.matches(of: enumCase) { found.append((String(match.output.1), file)) }
            }
        }
        return found
    }

    @Test("a foreign-key failure and a unique one are both constraint, told apart by the extended result code on the error")
    func extendedResultCodes() throws {
        let directory = TemporaryDirectory()
        let database = try Database(path: directory.file("fk.sqlite"), key: try SecureBytes.random(count: 32))
        try database.execute("PRAGMA foreign_keys = ON")
        try database.execute("CREATE TABLE parent(id INTEGER PRIMARY KEY); CREATE TABLE child(parent INTEGER REFERENCES parent(id))")
        try database.execute("INSERT INTO parent(id) VALUES (1)")
        func failure(_ sql: String) -> StoreError? {
            do {
                try database.execute(sql, [])
                return nil
            } catch {
                return error as? StoreError
            }
        }
        let foreignKey = try #require(failure("INSERT INTO child(parent) VALUES (42)"))
        let unique = try #require(failure("INSERT INTO parent(id) VALUES (1)"))
        #expect(foreignKey.code == .constraint && unique.code == .constraint)
        #expect(foreignKey.resultCode == 19 && unique.resultCode == 19)  // SQLITE_CONSTRAINT
        #expect(foreignKey.extendedResultCode == 787)  // SQLITE_CONSTRAINT_FOREIGNKEY
        #expect(unique.extendedResultCode == 1555)  // SQLITE_CONSTRAINT_PRIMARYKEY
        #expect(unique.sql == "INSERT INTO parent(id) VALUES (1)" && unique.path == directory.file("fk.sqlite"))
        #expect(StoreError(wrapping: foreignKey).extendedResultCode == 787, "wrapping a StoreError keeps it as it is")
        #expect("\(unique)".hasPrefix("constraint: "), "\(unique)")
        #expect(StoreError.queueFull(capacity: 1).extendedResultCode == nil, "an error SQLite did not report has no result code")
    }

    @Test("wrapping keeps a lower layer's code word and message, and the error itself as the cause")
    func wrappingKeepsTheCause() {
        let keys = SecureKeysError.damaged("truncated", path: "/tmp/x.key")
        let wrapped = StoreError(wrapping: keys)
        #expect(wrapped.code == .keyFileDamaged)
        #expect(wrapped.message == keys.message)
        #expect((wrapped.cause as? SecureKeysError)?.path == "/tmp/x.key")
        #expect(StoreError(wrapping: wrapped).location == wrapped.location, "a StoreError is not wrapped twice")
        #expect(StoreError(wrapping: CancellationError()).code == .cancelled)
        let inUse = StoreError(wrapping: DeviceError.stateInUse("/tmp/state", holder: 1234))
        #expect(inUse.code == .stateInUse)
        #expect(inUse.message.contains("in use by process 1234"))
        #expect((inUse.cause as? DeviceError)?.holderProcessID == 1234)
        #expect("\(StoreError.queueFull(capacity: 3))" == "queue-full: the operation queue is full (3 operations waiting for protected data)")
    }
}
