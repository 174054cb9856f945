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

    @Test("every code any layer defines (SecureKeysError, DeviceError, StoreError) is in StoreError.Code.all and in the README's error table")
    func everyLayersCodeIsListed() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let sources = [
            "Sources/StoreErrors/StoreError.swift",
            "Sources/SecureKeys/SecureKeysError.swift", "Sources/ProtectedData/DeviceError.swift",
            "Sources/ProtectedData/Agent/DeviceError+Agent.swift",
            "Sources/ProtectedStore/Errors/StoreError+ProtectedStore.swift",
        ]
        // A code is spelled `Code("name")` or, behind a private enum, `case member = "name"`.
        let patterns = [#/Code\("([a-z0-9-]+)"\)/#, #/case \w+ = "([a-z0-9-]+)"/#]
        var defined = Set<String>()
        for source in sources {
            let text = try String(contentsOf: root.appendingPathComponent(source), encoding: .utf8)
            for pattern in patterns {
                for match in text.matches(of: pattern) { defined.insert(String(match.output.1)) }
            }
        }
        #expect(defined.count >= 40, "the scan found too few codes to be reading the sources: \(defined.sorted())")
        let known = Set(StoreError.Code.all.map(\.name))
        #expect(defined.subtracting(known).isEmpty, "codes StoreError.Code.all lacks: \(defined.subtracting(known).sorted())")
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let table = try #require(readme.components(separatedBy: "## Errors").dropFirst().first?.components(separatedBy: "\n## ").first)
        let missing = defined.filter { !table.contains("`\($0)`") }
        #expect(missing.isEmpty, "codes missing from README.md's error table: \(missing.sorted())")
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
