/// The subscribers of a fan-out, each under the number it was given when it subscribed.
///
/// A value kept in its owner's state (under a lock, or on an actor): the owner adds a subscriber, removes it
/// when its subscription ends, and sends to each in the order they subscribed. What a subscriber is (a
/// handler, a stream's continuation with what it has not taken yet) is the owner's.
package struct Subscribers<Subscriber> {
    private var entries: [Int: Subscriber] = [:]
    private var lastID = 0

    /// No subscriber.
    package init() {}

    /// Adds `subscriber` and returns its number, larger than every number given before.
    package mutating func add(_ subscriber: Subscriber) -> Int {
        lastID += 1
        entries[lastID] = subscriber
        return lastID
    }

    /// Reserves a number without adding a subscriber (for a fan-out that is over).
    package mutating func skipID() -> Int {
        lastID += 1
        return lastID
    }

    /// Removes the subscriber numbered `id` and returns it.
    ///
    /// Returns `nil` when it is gone already.
    @discardableResult
    package mutating func remove(_ id: Int) -> Subscriber? {
        entries.removeValue(forKey: id)
    }

    /// Removes every subscriber and returns them in the order they subscribed.
    package mutating func removeAll() -> [Subscriber] {
        defer { entries.removeAll() }
        return inOrder
    }

    /// The subscriber numbered `id`, `nil` when it is gone.
    package subscript(id: Int) -> Subscriber? {
        get { entries[id] }
        _modify { yield &entries[id] }
    }

    /// Every subscriber, in the order they subscribed.
    package var inOrder: [Subscriber] {
        entries.sorted { $0.key < $1.key }.map(\.value)
    }

    /// The numbers of every subscriber, in the order they subscribed.
    package var ids: [Int] { entries.keys.sorted() }

    /// Whether nobody subscribes.
    package var isEmpty: Bool { entries.isEmpty }
}

extension Subscribers: Sendable where Subscriber: Sendable {}
