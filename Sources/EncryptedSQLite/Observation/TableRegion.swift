/// The tables a read looked at, or a transaction wrote to.
///
/// They decide whether a commit makes an observed value stale.
///
/// Table names are kept lowercased, since SQL names are not case-sensitive. A region can be *everything*:
/// when SQLite's authorizer did not say which tables a query read (SQLite 3.15 says nothing for
/// `SELECT count(*) FROM t`), the read is treated as depending on every table — an observation then wakes
/// up more often than it must, never less.
package struct TableRegion: Sendable, Hashable, CustomStringConvertible {
    /// The tables, lowercased.
    ///
    /// Meaningless when ``isEverything``.
    package private(set) var tables: Set<String>
    /// Whether the region covers every table.
    package private(set) var isEverything: Bool

    /// No table.
    package init() {
        tables = []
        isEverything = false
    }

    /// The given tables.
    package init(tables: some Sequence<String>) {
        self.tables = Set(tables.map { $0.lowercased() })
        isEverything = false
    }

    /// Every table.
    package static let everything: TableRegion = {
        var region = TableRegion()
        region.isEverything = true
        return region
    }()

    /// Whether the region covers no table.
    package var isEmpty: Bool { !isEverything && tables.isEmpty }

    /// Adds `other`'s tables.
    package mutating func formUnion(_ other: TableRegion) {
        if other.isEverything {
            self = .everything
        } else if !isEverything {
            tables.formUnion(other.tables)
        }
    }

    /// Whether a write to `other` can change what was read in `self`.
    package func intersects(_ other: TableRegion) -> Bool {
        if isEmpty || other.isEmpty { return false }
        if isEverything || other.isEverything { return true }
        return !tables.isDisjoint(with: other.tables)
    }

    package var description: String {
        isEverything ? "every table" : tables.sorted().joined(separator: ", ")
    }
}
