/// A connection's prepared statements, by SQL text, bounded.
///
/// Past ``capacity`` the least recently used is dropped (least recently *handed out*, as a hit counts as a use).
///
/// Dropping is finalizing, but never under a user: a ``Statement`` finalizes its SQLite statement in its
/// `deinit`, so a statement the cache drops while a caller still holds it — stepping through its rows, say
/// — lives on until that caller lets go, and the next request for its SQL prepares a fresh one.
///
/// O(1) per request: a dictionary from SQL text to a slot, and a doubly linked recency list threaded through
/// the slots by index (no node objects, so a hit moves two integers and retains nothing).
struct StatementCache {
    /// The most statements kept.
    ///
    /// 0 keeps none.
    let capacity: Int
    private var slotBySQL: [String: Int] = [:]
    private var slots: [Slot] = []
    /// The most recently used slot, or -1 when empty.
    private var newest = -1
    /// The least recently used slot, the next to go, or -1 when empty.
    private var oldest = -1

    private struct Slot {
        var sql: String
        var statement: Statement
        /// The next more recently used slot, or -1.
        var newer: Int
        /// The next less recently used slot, or -1.
        var older: Int
    }

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    /// How many statements are kept.
    var count: Int { slotBySQL.count }

    /// The kept statement for `sql`, now the most recently used.
    ///
    /// `nil` when none is kept.
    mutating func statement(for sql: String) -> Statement? {
        guard let slot = slotBySQL[sql] else { return nil }
        if slot != newest {
            unlink(slot)
            linkAsNewest(slot)
        }
        return slots[slot].statement
    }

    /// Keeps `statement` for `sql` as the most recently used, dropping the least recently used one when the
    /// cache is full. Nothing is kept when ``capacity`` is 0.
    mutating func insert(_ statement: Statement, for sql: String) {
        guard capacity > 0 else { return }
        if let slot = slotBySQL[sql] {
            slots[slot].statement = statement
            if slot != newest {
                unlink(slot)
                linkAsNewest(slot)
            }
            return
        }
        let slot: Int
        if slotBySQL.count < capacity {
            slot = slots.count
            slots.append(Slot(sql: sql, statement: statement, newer: -1, older: -1))
        } else {
            // Reuse the least recently used slot: its statement is released here, and finalized now unless a
            // caller still holds it.
            slot = oldest
            unlink(slot)
            slotBySQL[slots[slot].sql] = nil
            slots[slot].sql = sql
            slots[slot].statement = statement
        }
        slotBySQL[sql] = slot
        linkAsNewest(slot)
    }

    /// Whether a statement for `sql` is kept, without counting as a use (for tests).
    func contains(_ sql: String) -> Bool { slotBySQL[sql] != nil }

    /// Drops every statement.
    mutating func removeAll() {
        slotBySQL.removeAll()
        slots.removeAll()
        newest = -1
        oldest = -1
    }

    private mutating func unlink(_ slot: Int) {
        let newer = slots[slot].newer
        let older = slots[slot].older
        if newer >= 0 { slots[newer].older = older } else { newest = older }
        if older >= 0 { slots[older].newer = newer } else { oldest = newer }
        slots[slot].newer = -1
        slots[slot].older = -1
    }

    private mutating func linkAsNewest(_ slot: Int) {
        slots[slot].older = newest
        slots[slot].newer = -1
        if newest >= 0 { slots[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }
}
