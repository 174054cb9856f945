import Testing

@_spi(Testing) @testable import ProtectedStore

/// The machine with a string for a store, so effects read as words: `closeStore(s1)`.
private typealias Machine = LaunchMachine<String>

extension LaunchMachine<String> {
    /// Applies `event` and returns its effects as words.
    fileprivate mutating func on(_ event: LaunchEvent<String>) -> [String] {
        handle(event).map(\.description)
    }
}

@Suite("Launch state machine")
struct LaunchMachineTests {
    @Test("launch disables interaction and attaches; success keeps the store in the ready state, enables interaction and drains")
    func launchAndAttach() {
        var machine = Machine(protectionClass: .complete)
        #expect(machine.on(.launch(LaunchOptions())) == ["disableInteraction", "attachStore(1)"])
        #expect(machine.state.description == "launching(1)")
        #expect(machine.store == nil)
        #expect(machine.on(.attachSucceeded("s1", attempt: 1)) == ["enableInteraction", "drainQueue"])
        #expect(machine.state.description == "ready(s1)")
        #expect(machine.store == "s1")
        #expect(machine.on(.launch(LaunchOptions())) == [])
    }

    @Test("unavailable waits silently; the available event attaches again, with a new attempt")
    func waitForProtectedData() {
        var machine = Machine(protectionClass: .complete)
        _ = machine.on(.launch(LaunchOptions(reason: .location)))
        #expect(machine.on(.attachFailed(.protectedDataUnavailable, attempt: 1)) == [])
        #expect(machine.state.description == "waiting")
        #expect(machine.presentedError == nil)
        #expect(machine.on(.operationSubmitted) == [])
        #expect(machine.on(.protectedDataDidBecomeAvailable) == ["attachStore(2)"])
        #expect(machine.on(.protectedDataDidBecomeAvailable) == [], "a duplicate event is harmless")
    }

    @Test("an unlock during the attach makes an 'unavailable' result attach again instead of waiting")
    func unlockDuringAttach() {
        var machine = Machine(protectionClass: .complete)
        _ = machine.on(.launch(LaunchOptions()))
        _ = machine.on(.protectedDataDidBecomeAvailable)
        #expect(machine.on(.attachFailed(.protectedDataUnavailable, attempt: 1)) == ["attachStore(2)"])
        #expect(machine.state.description == "launching(2)")
    }

    @Test("a result of an attempt the machine no longer waits for closes its store and changes nothing")
    func staleAttempt() {
        var machine = Machine(protectionClass: .complete)
        _ = machine.on(.launch(LaunchOptions()))
        _ = machine.on(.protectedDataDidBecomeAvailable)
        _ = machine.on(.attachFailed(.protectedDataUnavailable, attempt: 1))
        #expect(machine.on(.attachSucceeded("old", attempt: 1)) == ["closeStore(old)"])
        #expect(machine.on(.attachFailed(.error(StoreError(code: .ioError, message: "x")), attempt: 1)) == [])
        #expect(machine.state.description == "launching(2)")
        #expect(machine.on(.attachSucceeded("new", attempt: 2)) == ["enableInteraction", "drainQueue"])
        #expect(machine.store == "new")
    }

    @Test("an error while protected data was available is presented once and never retried")
    func errorPresentedOnce() {
        var machine = Machine(protectionClass: .complete)
        let error = StoreError(code: .storeDamaged, message: "x")
        _ = machine.on(.launch(LaunchOptions()))
        #expect(machine.on(.attachFailed(.error(error), attempt: 1)) == ["presentError(store-damaged)", "failQueue(store-damaged)"])
        #expect(machine.on(.protectedDataDidBecomeAvailable) == [])
        #expect(machine.on(.protectedDataWillBecomeUnavailable) == [])
        #expect(machine.on(.operationSubmitted) == ["failQueue(store-damaged)"])
        #expect(machine.presentedError?.code == .storeDamaged)
    }

    @Test("a lock closes a class-A store and disables interaction; B, C and D stores stay open")
    func lockClosesOnlyClassA() {
        for protectionClass in [ProtectionClass.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication, .none] {
            var machine = Machine(protectionClass: protectionClass)
            _ = machine.on(.launch(LaunchOptions()))
            _ = machine.on(.attachSucceeded("s1", attempt: 1))
            let effects = machine.on(.protectedDataWillBecomeUnavailable)
            if protectionClass == .complete {
                #expect(effects == ["disableInteraction", "closeStore(s1)"])
                #expect(machine.state.description == "waiting")
                #expect(machine.store == nil)
            } else {
                #expect(effects == [], "\(protectionClass)")
                #expect(machine.store == "s1")
            }
        }
    }

    @Test("a class-A store attached during the grace period closes when the keys are wiped")
    func attachedDuringGracePeriod() {
        var machine = Machine(protectionClass: .complete)
        _ = machine.on(.launch(LaunchOptions()))
        _ = machine.on(.attachSucceeded("s1", attempt: 1))
        #expect(machine.on(.protectedDataDidBecomeUnavailable) == ["disableInteraction", "closeStore(s1)"])
        #expect(machine.state.description == "waiting")
        var classB = Machine(protectionClass: .completeUnlessOpen)
        _ = classB.on(.launch(LaunchOptions()))
        _ = classB.on(.attachSucceeded("s1", attempt: 1))
        #expect(classB.on(.protectedDataDidBecomeUnavailable) == [])
    }

    @Test("a lock during a class-A attach closes the store as soon as it attaches")
    func lockDuringAttach() {
        var machine = Machine(protectionClass: .complete)
        _ = machine.on(.launch(LaunchOptions()))
        _ = machine.on(.protectedDataWillBecomeUnavailable)
        #expect(machine.on(.attachSucceeded("s1", attempt: 1)) == ["closeStore(s1)"])
        #expect(machine.state.description == "waiting")
        #expect(!machine.isInteractionEnabled)
    }

    @Test("terminate closes the store and cancels the queue, once; an attach that finishes later is closed")
    func terminate() {
        var machine = Machine(protectionClass: .complete)
        _ = machine.on(.launch(LaunchOptions()))
        #expect(machine.on(.terminate) == ["cancelQueue"])
        #expect(machine.on(.terminate) == [])
        #expect(machine.on(.attachSucceeded("late", attempt: 1)) == ["closeStore(late)"])
        var ready = Machine(protectionClass: .complete)
        _ = ready.on(.launch(LaunchOptions()))
        _ = ready.on(.attachSucceeded("s1", attempt: 1))
        #expect(ready.on(.terminate) == ["closeStore(s1)", "cancelQueue"])
    }

    @Test("an abandoned app (its process killed) does nothing, whatever happens next")
    func abandon() {
        var machine = Machine(protectionClass: .complete)
        _ = machine.on(.launch(LaunchOptions()))
        _ = machine.on(.attachSucceeded("s1", attempt: 1))
        #expect(machine.on(.abandon) == [])
        #expect(machine.on(.protectedDataWillBecomeUnavailable) == [])
        #expect(machine.on(.terminate) == [])
        #expect(machine.on(.attachSucceeded("s2", attempt: 1)) == [])
        #expect(machine.state.description == "abandoned")
    }
}
