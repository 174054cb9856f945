import Foundation
import SecureKeys
import Testing

@_spi(Testing) @testable import ProtectedStore

/// Where an app writes — `StoreCoordinator.write { db in … }` — a savepoint undoes only its own part.
@Suite("Store savepoints")
@MainActor
struct StoreSavepointTests {
    enum ImportError: Error, Equatable {
        case badRow(Int)
    }

    @Test("in a store write, a failing savepoint undoes only its rows, the write commits the rest, and the body's error comes out unchanged")
    func savepointInAStoreWrite() async throws {
        let fixture = try ControllerFixture()
        fixture.migrator.registerMigration("rows") { db in
            try db.execute("CREATE TABLE imported(id INTEGER PRIMARY KEY, batch TEXT NOT NULL)")
        }
        fixture.controller = fixture.makeController()
        await fixture.launch()
        let coordinator = try #require(fixture.controller.coordinator)

        let failures = try await coordinator.write { db -> [ImportError] in
            var failures: [ImportError] = []
            for batch in 0..<3 {
                do {
                    try db.inSavepoint {
                        try db.execute("INSERT INTO imported(id, batch) VALUES (?, ?)", [batch * 10, "batch \(batch)"])
                        try db.execute("INSERT INTO imported(id, batch) VALUES (?, ?)", [batch * 10 + 1, "batch \(batch)"])
                        if batch == 1 { throw ImportError.badRow(batch * 10 + 1) }
                    }
                } catch let error as ImportError {
                    failures.append(error)
                }
            }
            return failures
        }
        #expect(failures == [.badRow(11)])
        #expect(try await coordinator.read { try $0.fetchValues(Int.self, "SELECT id FROM imported ORDER BY id") } == [0, 1, 20, 21])

        // A savepoint's error not caught inside the write rolls the whole write back and reaches the app as is.
        var caught: (any Error)?
        do {
            try await coordinator.write { db in
                try db.execute("INSERT INTO imported(id, batch) VALUES (?, ?)", [30, "batch 3"])
                try db.inSavepoint { throw ImportError.badRow(31) }
            }
        } catch {
            caught = error
        }
        #expect(caught as? ImportError == .badRow(31), "got \(String(describing: caught))")
        #expect(try await coordinator.read { try $0.fetchValues(Int.self, "SELECT count(*) FROM imported") } == [4])
    }
}
