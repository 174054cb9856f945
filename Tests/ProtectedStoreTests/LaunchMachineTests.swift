import Testing

@testable import ProtectedStore

@Suite("Launch state machine")
struct LaunchMachineTests {
    @Test("launch disables interaction and attaches; success enables interaction and drains")
    func launchAndAttach() {
        var machine = LaunchMachine(protectionClass: .complete)
        #expect(machine.handle(.launch(LaunchOptions())) == [.disableInteraction, .attachStore])
        #expect(machine.phase == .launching)
        #expect(machine.handle(.attachSucceeded) == [.enableInteraction, .drainQueue])
        #expect(machine.phase == .ready)
        #expect(machine.handle(.launch(LaunchOptions())) == [])
    }

    @Test("unavailable waits silently; the available event attaches again")
    func waitForProtectedData() {
        var machine = LaunchMachine(protectionClass: .complete)
        _ = machine.handle(.launch(LaunchOptions(reason: .location)))
        #expect(machine.handle(.attachFailed(.protectedDataUnavailable)) == [])
        #expect(machine.phase == .waitingForProtectedData)
        #expect(machine.presentedError == nil)
        #expect(machine.handle(.operationSubmitted) == [])
        #expect(machine.handle(.protectedDataDidBecomeAvailable) == [.attachStore])
        #expect(machine.handle(.protectedDataDidBecomeAvailable) == [], "a duplicate event is harmless")
    }

    @Test("an unlock during the attach makes an 'unavailable' result attach again instead of waiting")
    func unlockDuringAttach() {
        var machine = LaunchMachine(protectionClass: .complete)
        _ = machine.handle(.launch(LaunchOptions()))
        _ = machine.handle(.protectedDataDidBecomeAvailable)
        #expect(machine.handle(.attachFailed(.protectedDataUnavailable)) == [.attachStore])
        #expect(machine.phase == .launching)
    }

    @Test("an error while protected data was available is presented once and never retried")
    func errorPresentedOnce() {
        var machine = LaunchMachine(protectionClass: .complete)
        let error = StoreError(codeName: "store-damaged", message: "x")
        _ = machine.handle(.launch(LaunchOptions()))
        #expect(machine.handle(.attachFailed(.error(error))) == [.presentError(error), .failQueue(error)])
        #expect(machine.handle(.protectedDataDidBecomeAvailable) == [])
        #expect(machine.handle(.protectedDataWillBecomeUnavailable) == [])
        #expect(machine.handle(.operationSubmitted) == [.failQueue(error)])
        #expect(machine.presentedError == error)
    }

    @Test("a lock closes a class-A store and disables interaction; B, C and D stores stay open")
    func lockClosesOnlyClassA() {
        for protectionClass in [ProtectionClass.complete, .completeUnlessOpen, .completeUntilFirstUserAuthentication, .none] {
            var machine = LaunchMachine(protectionClass: protectionClass)
            _ = machine.handle(.launch(LaunchOptions()))
            _ = machine.handle(.attachSucceeded)
            let effects = machine.handle(.protectedDataWillBecomeUnavailable)
            if protectionClass == .complete {
                #expect(effects == [.disableInteraction, .closeStore])
                #expect(machine.phase == .waitingForProtectedData)
            } else {
                #expect(effects == [], "\(protectionClass)")
                #expect(machine.phase == .ready)
            }
        }
    }

    @Test("a class-A store attached during the grace period closes when the keys are wiped")
    func attachedDuringGracePeriod() {
        var machine = LaunchMachine(protectionClass: .complete)
        _ = machine.handle(.launch(LaunchOptions()))
        _ = machine.handle(.attachSucceeded)
        #expect(machine.handle(.protectedDataDidBecomeUnavailable) == [.disableInteraction, .closeStore])
        #expect(machine.phase == .waitingForProtectedData)
        var classB = LaunchMachine(protectionClass: .completeUnlessOpen)
        _ = classB.handle(.launch(LaunchOptions()))
        _ = classB.handle(.attachSucceeded)
        #expect(classB.handle(.protectedDataDidBecomeUnavailable) == [])
    }

    @Test("a lock during a class-A attach closes the store as soon as it attaches")
    func lockDuringAttach() {
        var machine = LaunchMachine(protectionClass: .complete)
        _ = machine.handle(.launch(LaunchOptions()))
        _ = machine.handle(.protectedDataWillBecomeUnavailable)
        #expect(machine.handle(.attachSucceeded) == [.closeStore])
        #expect(machine.phase == .waitingForProtectedData)
        #expect(!machine.isInteractionEnabled)
    }

    @Test("terminate closes the store and cancels the queue, once")
    func terminate() {
        var machine = LaunchMachine(protectionClass: .complete)
        _ = machine.handle(.launch(LaunchOptions()))
        #expect(machine.handle(.terminate) == [.closeStore, .cancelQueue])
        #expect(machine.handle(.terminate) == [])
        #expect(machine.handle(.attachSucceeded) == [.closeStore])
    }
}
