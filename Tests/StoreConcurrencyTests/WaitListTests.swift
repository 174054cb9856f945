import Testing

import StoreConcurrency

@Suite("WaitList", .timeLimit(.minutes(1)))
struct WaitListTests {
    /// A gate: closed while `isClosed`, its waiters in `waiters`.
    private struct Gate {
        var isClosed = true
        var waiters = WaitList()
    }

    @Test("a wait whose condition does not hold returns at once and joins no list")
    func waitWithoutConditionReturnsAtOnce() async {
        let state = LockedState(Gate(isClosed: false))
        await state.wait(on: \.waiters) { $0.isClosed }
        #expect(state.withLock { $0.waiters.isEmpty })
    }

    @Test("waiters stay suspended until the owner takes and resumes them, then all return")
    func waitersReturnOnlyOnceReleased() async {
        let state = LockedState(Gate())
        let returned = LockedState(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    await state.wait(on: \.waiters) { $0.isClosed }
                    returned.withLock { $0 += 1 }
                }
            }
            // Until a task has joined the list (or, were waiting broken, returned), then a while more.
            var spins = 0
            while state.withLock({ $0.waiters.isEmpty }) && returned.withLock({ $0 }) == 0 && spins < 100_000 {
                await Task.yield()
                spins += 1
            }
            for _ in 0..<100 { await Task.yield() }
            #expect(returned.withLock { $0 } == 0)
            let joined = state.withLock { gate -> Bool in !gate.waiters.isEmpty }
            #expect(joined)
            state.withLock { gate -> WaitList.Released in
                gate.isClosed = false
                return gate.waiters.takeAll()
            }.resume()
            await group.waitForAll()
        }
        #expect(returned.withLock { $0 } == 3)
        #expect(state.withLock { $0.waiters.isEmpty })
    }

    @Test("takeAll empties the list; resuming what was taken reaches nobody who joined later")
    func takeAllEmptiesTheList() async {
        let state = LockedState(Gate())
        let finished = LockedState(false)
        let waiter = Task {
            await state.wait(on: \.waiters) { $0.isClosed }
            finished.withLock { $0 = true }
        }
        var spins = 0
        while state.withLock({ $0.waiters.isEmpty }) && !finished.withLock({ $0 }) && spins < 100_000 {
            await Task.yield()
            spins += 1
        }
        #expect(!finished.withLock { $0 })
        let released = state.withLock { $0.waiters.takeAll() }
        #expect(state.withLock { $0.waiters.isEmpty })
        released.resume()
        await waiter.value
        WaitList.Released.none.resume()
    }
}
