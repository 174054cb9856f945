import Testing

import StoreConcurrency

@Suite("Subscribers")
struct SubscribersTests {
    @Test("numbers grow with each subscription, and inOrder lists subscribers in the order they subscribed")
    func subscribersInOrder() {
        var subscribers = Subscribers<String>()
        #expect(subscribers.isEmpty)
        let ids = (1...12).map { subscribers.add("s\($0)") }
        #expect(ids == Array(1...12))
        #expect(subscribers.inOrder == (1...12).map { "s\($0)" })
        #expect(subscribers.ids == ids)
    }

    @Test("a removed subscriber is gone, and its number is never given again")
    func removedNumbersAreNotReused() {
        var subscribers = Subscribers<String>()
        let first = subscribers.add("a")
        let second = subscribers.add("b")
        #expect(subscribers.remove(first) == "a")
        #expect(subscribers.remove(first) == nil)
        #expect(subscribers[first] == nil)
        let skipped = subscribers.skipID()
        let third = subscribers.add("c")
        #expect(skipped > second && third > skipped)
        #expect(subscribers.inOrder == ["b", "c"])
    }

    @Test("a subscriber is changed in place through its number")
    func subscriberChangedInPlace() {
        var subscribers = Subscribers<[Int]>()
        let id = subscribers.add([])
        subscribers[id]?.append(1)
        subscribers[id]!.append(2)
        #expect(subscribers[id] == [1, 2])
    }

    @Test("removeAll returns every subscriber in order and leaves none")
    func removeAllReturnsEveryoneInOrder() {
        var subscribers = Subscribers<Int>()
        for value in [30, 10, 20] { _ = subscribers.add(value) }
        #expect(subscribers.removeAll() == [30, 10, 20])
        #expect(subscribers.isEmpty)
        #expect(subscribers.removeAll() == [])
    }
}
