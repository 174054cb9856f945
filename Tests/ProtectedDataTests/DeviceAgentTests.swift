import TestSupport
import Foundation
import SecureKeys
import Synchronization
import SystemPackage
import Testing
#if canImport(Glibc)
import Glibc
#endif

@_spi(DeviceAgentWire) @testable import ProtectedData

/// An agent serving on a temporary directory (a short path: a socket path must fit in 108 bytes), on a thread
/// of its own, with the minimal Argon2id cost.
final class AgentFixture: @unchecked Sendable {
    // @unchecked Sendable: every stored property is a constant, and `served` is a semaphore.
    let directory = TemporaryDirectory()
    let agent: DeviceAgent
    let passcode = "1234"
    private let served = DispatchSemaphore(value: 0)

    init(
        maximumClients: Int = 32, requestTimeout: Duration = .seconds(30),
        setUp gracePeriod: Duration? = .seconds(10)
    ) throws {
        agent = try DeviceAgent(
            stateDirectory: directory.path,
            configuration: .init(kdf: .minimal, maximumClients: maximumClients, requestTimeout: requestTimeout))
        Thread { [agent, served] in
            agent.serve()
            served.signal()
        }.start()
        if let gracePeriod {
            let client = try connect("set-up")
            try client.setUp(passcode: try SecureBytes(utf8: passcode), gracePeriod: gracePeriod)
            client.disconnect()
        }
    }

    var socketPath: String { agent.socketPath }

    /// A well-behaved client.
    func connect(_ name: String) throws -> DeviceAgentClient {
        try #require(try DeviceAgentClient.connect(toAgentOf: directory.path, clientName: name))
    }

    /// A raw socket to the agent, for a client that breaks the protocol.
    func raw() throws -> RawClient { try RawClient(path: socketPath) }

    /// Stops the agent and waits for `serve()` to return.
    func stop() {
        agent.stop()
        #expect(served.wait(timeout: .now() + 30) == .success, "serve() did not return after stop()")
    }

    /// A new well-behaved client gets the state `expected` (lock state, availability, failed attempts): the
    /// agent still serves, and what a bad client did changed nothing.
    func expectStillServes(_ expected: DeviceAgentStatus, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let client = try connect("good")
        let now = try client.status()
        #expect(now.lockState == expected.lockState, sourceLocation: sourceLocation)
        #expect(now.availability == expected.availability, sourceLocation: sourceLocation)
        #expect(now.failedPasscodeAttempts == expected.failedPasscodeAttempts, sourceLocation: sourceLocation)
        client.disconnect()
    }

    /// Waits (generously: the machine is shared) until the agent counts `count` clients.
    func waitForClientCount(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        let reached = poll { self.agent.clientCount == count }
        #expect(reached, "the agent still counts \(agent.clientCount) clients, not \(count)", sourceLocation: sourceLocation)
    }
}

/// Polls `condition` every 10 ms until it holds or `seconds` pass.
func poll(seconds: Double = 30, _ condition: () -> Bool) -> Bool {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while !condition() {
        guard Date() < deadline else { return false }
        usleep(10_000)
    }
    return true
}

/// A client socket that writes whatever bytes it is told to; every read gives up after 30 s.
final class RawClient {
    let descriptor: FileDescriptor

    init(path: String) throws {
        switch try UnixSocket.connect(to: path) {
        case .success(let descriptor): self.descriptor = descriptor
        case .failure(let error): throw error
        }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(descriptor.rawValue, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { try? descriptor.close() }

    func send(_ bytes: [UInt8]) {
        #expect(bytes.withUnsafeBytes { UnixSocket.sendAll(descriptor, $0, deadline: nil) }, "the agent closed before the bytes were sent")
    }

    func send(_ request: AgentRequest, id: UInt32 = 1) throws {
        #expect(FrameChannel.send(try AgentWireFormat.encode(request, id: id), on: descriptor, within: nil))
    }

    func hello() throws {
        try send(.hello(protocolVersion: AgentWireFormat.protocolVersion, clientName: "raw"))
        let answer = try receive()
        guard case .status = answer.reply else { Issue.record("hello answered with \(answer.reply)"); return }
    }

    /// The next frame from the agent.
    func receive(sourceLocation: SourceLocation = #_sourceLocation) throws -> AgentWireFormat.ReplyFrame {
        guard case .body(let body) = FrameChannel.receive(descriptor, firstByteTimeout: .seconds(30), timeout: .seconds(30)) else {
            throw RawClientError.noFrame
        }
        return try body.withUnsafeBytes { try AgentWireFormat.decodeReply($0) }
    }

    /// The agent's refusal of this connection (a failure with id 0), whose message must contain `naming`,
    /// and then the end of the connection.
    func expectRefusal(naming: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let frame = try receive()
        #expect(frame.id == 0, sourceLocation: sourceLocation)
        guard case .failure(let failure) = frame.reply else {
            Issue.record("expected a refusal, got \(frame.reply)", sourceLocation: sourceLocation)
            return
        }
        #expect(failure.code == "agent-refused", sourceLocation: sourceLocation)
        #expect(failure.message.contains(naming), "\(failure.message)", sourceLocation: sourceLocation)
        expectClosed(sourceLocation: sourceLocation)
    }

    /// The agent closed the connection: a read gives the end of the stream (not a timeout, not a frame).
    func expectClosed(sourceLocation: SourceLocation = #_sourceLocation) {
        var byte: UInt8 = 0
        var count: Int
        repeat { count = recv(descriptor.rawValue, &byte, 1, 0) } while count < 0 && errno == EINTR
        let failure = count < 0 ? String(cString: strerror(errno)) : ""
        #expect(count == 0 || (count < 0 && errno == ECONNRESET), "the agent did not close the connection: \(count) \(failure)", sourceLocation: sourceLocation)
    }
}

enum RawClientError: Error { case noFrame }

/// The error a request throws, as `code` (and the `DeviceError` itself, when it is one).
func agentError(_ body: () throws -> Void) -> DeviceError? {
    do {
        try body()
        Issue.record("expected an error")
        return nil
    } catch let error as DeviceError {
        return error
    } catch {
        Issue.record("unexpected \(error)")
        return nil
    }
}

@Suite("Device agent: bad clients are refused, good ones still served", .timeLimit(.minutes(5)))
struct DeviceAgentTests {
    @Test("a request before hello is refused, naming hello, and the agent still serves")
    func requestBeforeHello() throws {
        let fixture = try AgentFixture()
        defer { fixture.stop() }
        let before = try fixture.connect("before").status()
        let bad = try fixture.raw()
        try bad.send(.unlock(passcode: try SecureBytes(utf8: "0000")))
        try bad.expectRefusal(naming: "the first request must be hello")
        try fixture.expectStillServes(before)
    }

    @Test("a hello with another protocol version is refused, naming the version, and the agent still serves")
    func helloWithOtherVersion() throws {
        let fixture = try AgentFixture()
        defer { fixture.stop() }
        let before = try fixture.connect("before").status()
        let bad = try fixture.raw()
        try bad.send(.hello(protocolVersion: AgentWireFormat.protocolVersion + 1, clientName: "future"))
        try bad.expectRefusal(naming: "hello with protocol version \(AgentWireFormat.protocolVersion)")
        try fixture.expectStillServes(before)
    }

    @Test("a malformed body is refused with the reason, the connection closed, and the agent still serves")
    func malformedBody() throws {
        let fixture = try AgentFixture()
        defer { fixture.stop() }
        let good = try fixture.connect("good")
        try good.lock()
        _ = agentError { try good.unlock(passcode: try SecureBytes(utf8: "0000")) }
        let before = try good.status()
        #expect(before.failedPasscodeAttempts == 1)
        for body: [UInt8] in [[99, 0, 0, 0, 1], [2, 0, 0, 0, 1, 0], [4, 0, 0, 0, 1, 0, 0, 0, 9, 1]] {
            let bad = try fixture.raw()
            try bad.hello()
            bad.send([0, 0, 0, UInt8(body.count)] + body)
            try bad.expectRefusal(naming: "a malformed request")
        }
        try fixture.expectStillServes(before)
        fixture.waitForClientCount(1)
    }

    @Test("a length prefix over 64 KiB is refused without reading a body, and the agent still serves")
    func oversizedLengthPrefix() throws {
        let fixture = try AgentFixture()
        defer { fixture.stop() }
        let before = try fixture.connect("before").status()
        let bad = try fixture.raw()
        try bad.hello()
        // No body follows: an agent that waited for one would cut the client off after the request timeout
        // (30 s here) without a refusal.
        bad.send([0, 1, 0, 1])
        try bad.expectRefusal(naming: "a frame of 65537 bytes is over the 64 KiB limit")
        let short = try fixture.raw()
        short.send([0, 0, 0, 0])
        try short.expectRefusal(naming: "a frame of 0 bytes is too short")
        try fixture.expectStillServes(before)
    }

    @Test("a client that sends a length and half a body and then vanishes is dropped at once, and the agent still serves")
    func vanishesMidRequest() throws {
        // A request timeout far longer than the wait below: the client must be dropped because it closed.
        let fixture = try AgentFixture(requestTimeout: .seconds(600))
        defer { fixture.stop() }
        let before = try fixture.connect("before").status()
        fixture.waitForClientCount(0)
        do {
            let bad = try fixture.raw()
            try bad.hello()
            let frame = try AgentWireFormat.encode(.unlock(passcode: try SecureBytes(utf8: "0000")), id: 2).withUnsafeBytes { Array($0) }
            bad.send(Array(frame.prefix(frame.count / 2)))
            fixture.waitForClientCount(1)
        }  // closed here
        fixture.waitForClientCount(0)
        try fixture.expectStillServes(before)
    }

    @Test("a client that connects and never says hello is refused and cut off after the request timeout")
    func silentClient() throws {
        let fixture = try AgentFixture(requestTimeout: .milliseconds(300))
        defer { fixture.stop() }
        let good = try fixture.connect("good")
        let before = try good.status()
        let silent = try fixture.raw()
        try silent.expectRefusal(naming: "no hello within 300ms")
        fixture.waitForClientCount(1)
        try fixture.expectStillServes(before)
    }

    @Test("a client that sends half a body and stalls is refused and cut off after the request timeout; others are served meanwhile")
    func stallsMidRequest() throws {
        let fixture = try AgentFixture(requestTimeout: .milliseconds(300))
        defer { fixture.stop() }
        let good = try fixture.connect("good")
        let before = try good.status()
        let bad = try fixture.raw()
        try bad.hello()
        let frame = try AgentWireFormat.encode(.unlock(passcode: try SecureBytes(utf8: "0000")), id: 2).withUnsafeBytes { Array($0) }
        bad.send(Array(frame.prefix(frame.count / 2)))
        #expect(try good.status().failedPasscodeAttempts == 0)
        try bad.expectRefusal(naming: "did not arrive whole within 300ms")
        fixture.waitForClientCount(1)
        try fixture.expectStillServes(before)
        #expect(try good.status().lockState == before.lockState)
    }

    @Test("past maximumClients a client is refused, naming the bound; once one leaves a new one is admitted")
    func flood() throws {
        let fixture = try AgentFixture(maximumClients: 4)
        defer { fixture.stop() }
        fixture.waitForClientCount(0)
        var clients = try (1...4).map { try fixture.connect("client \($0)") }
        fixture.waitForClientCount(4)
        let fifth = try fixture.raw()
        try fifth.expectRefusal(naming: "4 clients are connected, the most it serves at once")
        #expect(agentError { _ = try fixture.connect("sixth") }?.code == .agentRefused)
        #expect(fixture.agent.clientCount == 4)
        for client in clients { #expect(try client.status().lockState == .unlocked) }
        clients.removeFirst().disconnect()
        fixture.waitForClientCount(3)
        let newcomer = try fixture.connect("newcomer")
        #expect(try newcomer.status().lockState == .unlocked)
        fixture.waitForClientCount(4)
        clients.append(newcomer)
    }

    @Test("wrong passcodes from two clients add up: the fifth starts a one-minute delay that binds both")
    func wrongPasscodesAddUp() throws {
        let fixture = try AgentFixture()
        defer { fixture.stop() }
        let first = try fixture.connect("first")
        let second = try fixture.connect("second")
        try first.lock()
        let wrong = try SecureBytes(utf8: "0000")
        for expected in 1...3 {
            let error = agentError { try first.unlock(passcode: wrong) }
            #expect(error?.code == .wrongPasscode)
            #expect(error?.failedAttempts == expected)
            #expect(error?.retryAfter == nil)
        }
        let fourth = agentError { try second.unlock(passcode: wrong) }
        #expect(fourth?.code == .wrongPasscode)
        #expect(fourth?.failedAttempts == 4)
        let fifth = agentError { try second.unlock(passcode: wrong) }
        #expect(fifth?.code == .wrongPasscode)
        #expect(fifth?.failedAttempts == 5)
        #expect(fifth?.retryAfter == .seconds(60))
        #expect(try first.status().failedPasscodeAttempts == 5)
        let right = agentError { try first.unlock(passcode: try SecureBytes(utf8: fixture.passcode)) }
        #expect(right?.code == .passcodeDelay)
        #expect(right?.retryAfter == .seconds(60))
        #expect(try second.status().lockState != .unlocked)
        try second.advanceClock(by: .seconds(60))
        try first.unlock(passcode: try SecureBytes(utf8: fixture.passcode))
        #expect(try second.status().failedPasscodeAttempts == 0)
    }

    @Test("a lock by one client reaches another's subscribers; store keys follow the lock state")
    func eventsAndStoreKeys() throws {
        let fixture = try AgentFixture(setUp: .zero)
        defer { fixture.stop() }
        let app = try fixture.connect("app")
        let widget = try fixture.connect("widget")
        let storePath = fixture.directory.file("notes.sqlite")
        #expect(try app.lookUpStoreKey(forStoreAt: storePath).description == "absent")
        let created = try app.createStoreKey(forStoreAt: storePath, protectionClass: .complete)
        guard case .available(let key) = try app.lookUpStoreKey(forStoreAt: storePath) else {
            Issue.record("the store key is not available while unlocked")
            return
        }
        #expect(key.constantTimeEquals(created))

        let recorder = EventRecorder()
        let (availability, subscription) = app.subscribe(recorder.record)
        defer { subscription.cancel() }
        #expect(availability.isAvailable(.complete))
        #expect(app.isProtectedDataAvailable(for: .complete))
        try widget.lock()
        #expect(poll { recorder.events == [.willBecomeUnavailable, .didBecomeUnavailable] }, "\(recorder.events)")
        #expect(!app.isProtectedDataAvailable(for: .complete))
        #expect(app.isProtectedDataAvailable(for: .none))
        guard case .locked(let protectionClass) = try app.lookUpStoreKey(forStoreAt: storePath) else {
            Issue.record("the store key is not locked while locked")
            return
        }
        #expect(protectionClass == .complete)

        try widget.unlock(passcode: try SecureBytes(utf8: fixture.passcode))
        #expect(poll { recorder.events.last == .didBecomeAvailable }, "\(recorder.events)")
        #expect(app.isProtectedDataAvailable(for: .complete))
        guard case .available(let again) = try app.lookUpStoreKey(forStoreAt: storePath) else {
            Issue.record("the store key is not available after the unlock")
            return
        }
        #expect(again.constantTimeEquals(created))
    }

    @Test("when the agent stops, subscribers get didBecomeUnavailable and requests throw agent-disconnected")
    func agentStops() throws {
        let fixture = try AgentFixture()
        let app = try fixture.connect("app")
        let recorder = EventRecorder()
        let (_, subscription) = app.subscribe(recorder.record)
        defer { subscription.cancel() }
        #expect(app.isProtectedDataAvailable(for: .complete))
        fixture.stop()
        #expect(poll { recorder.events == [.didBecomeUnavailable] }, "\(recorder.events)")
        #expect(!app.isConnected)
        #expect(!app.isProtectedDataAvailable(for: .none))
        #expect(agentError { _ = try app.status() }?.code == .agentDisconnected)
        #expect(agentError { try app.lock() }?.code == .agentDisconnected)
    }

    @Test("once the client says the agent is gone, every subscriber has had didBecomeUnavailable, even a slow one")
    func goneOnlyAfterDelivery() throws {
        let fixture = try AgentFixture()
        let app = try fixture.connect("app")
        let delivered = Mutex(false)
        // A subscriber that takes its time, as a loaded machine makes any: before the fix, `isConnected` went
        // false (and a waiting request failed) while this handler had not yet been called, so a shell's
        // `expect store waiting` after the agent died found the store still ready (a CI run under TSan).
        let (_, subscription) = app.subscribe { event in
            guard event == .didBecomeUnavailable else { return }
            usleep(300_000)
            delivered.withLock { $0 = true }
        }
        defer { subscription.cancel() }
        fixture.stop()
        #expect(poll { !app.isConnected })
        #expect(delivered.withLock { $0 }, "the client reported the agent gone before its subscriber had the event")
        #expect(agentError { _ = try app.status() }?.code == .agentDisconnected)
    }

    @Test("a second agent on the same directory is refused with state-in-use")
    func secondAgentRefused() throws {
        let fixture = try AgentFixture()
        defer { fixture.stop() }
        let error = agentError {
            _ = try DeviceAgent(stateDirectory: fixture.directory.path, configuration: .init(kdf: .minimal))
        }
        #expect(error?.code == .stateInUse)
        #expect(error?.holderProcessID == getpid())
        // The first agent's socket is still the one clients reach.
        #expect(try fixture.connect("after").status().lockState == .unlocked)
    }
}
