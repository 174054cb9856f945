import Foundation
import SecureKeys
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@_spi(DeviceAgentWire) @testable import ProtectedData

/// An agent given a runtime directory (`device serve --session`: `$XDG_RUNTIME_DIR`) listens there, and its
/// clients still find it from the state directory alone; a temporary folder stands in for `/run/user/UID`.
@Suite("device agent socket in the runtime directory", .serialized)
struct AgentRuntimeSocketTests {
    /// A state directory and a runtime directory (both 0700, from `mkdtemp`).
    let state = TemporaryDirectory()
    let runtime = TemporaryDirectory()

    var plainSocket: String { state.file("agent/device.sock") }
    var location: String { state.file("agent/socket-location") }

    func makeAgent(in directory: String? = nil, runtime: String? = nil) throws -> DeviceAgent {
        try DeviceAgent(
            stateDirectory: directory ?? state.path,
            configuration: .init(kdf: .minimal, runtimeDirectory: runtime ?? self.runtime.path))
    }

    /// Serves `agent` on a thread of its own until `body` returns, then stops it.
    func serving<T>(_ agent: DeviceAgent, _ body: () throws -> T) rethrows -> T {
        let served = DispatchSemaphore(value: 0)
        // Weak: the agent is freed when the test lets it go, not when this thread happens to end.
        Thread { [weak agent] in
            agent?.serve()
            served.signal()
        }.start()
        defer {
            agent.stop()
            #expect(served.wait(timeout: .now() + 30) == .success, "serve() did not return after stop()")
        }
        return try body()
    }

    /// Lets `agent` go and waits until it is freed — as a killed agent is gone — once the threads of the
    /// clients it served have ended (each holds it until then).
    func release(_ agent: inout DeviceAgent?) {
        weak let freed = agent
        agent = nil
        #expect(poll { freed == nil }, "the agent is still held")
    }

    func connect(_ directory: String? = nil) throws -> DeviceAgentClient? {
        try DeviceAgentClient.connect(toAgentOf: directory ?? state.path, clientName: "test")
    }

    /// `path`'s mode bits.
    func mode(_ path: String) -> mode_t {
        var info = stat()
        #expect(lstat(path, &info) == 0, "\(path) is missing")
        return info.st_mode
    }

    @Test("the socket is in the runtime directory, named in the state directory's agent/socket-location; a client needs only the state directory; stop removes both")
    func listensInTheRuntimeDirectory() throws {
        let agent = try makeAgent()
        #expect(agent.socketPath.hasPrefix(runtime.path + "/protected-store/device-"), "\(agent.socketPath)")
        #expect(agent.socketPath.hasSuffix(".sock"))
        #expect(mode(agent.socketPath) & S_IFMT == S_IFSOCK)
        #expect(mode(agent.socketPath) & 0o777 == 0o600)
        #expect(mode(runtime.file("protected-store")) & 0o777 == 0o700)
        #expect(!SecureFile.exists(plainSocket), "a socket in the state directory too")
        #expect(try SecureFile.read(location) == Array((agent.socketPath + "\n").utf8))
        #expect(mode(location) & 0o777 == 0o600)
        try serving(agent) {
            let client = try #require(try connect())
            defer { client.disconnect() }
            try client.setUp(passcode: try SecureBytes(utf8: "1234"))
            #expect(try client.status().lockState == .unlocked)
        }
        #expect(!SecureFile.exists(agent.socketPath))
        #expect(!SecureFile.exists(location))
        #expect(try connect() == nil)
    }

    @Test("a state directory too deep for a socket address (108 bytes) is served through the short runtime path")
    func deepStateDirectory() throws {
        let deep = state.path + "/" + String(repeating: "d", count: 60) + "/" + String(repeating: "e", count: 60)
        #expect(deep.utf8.count + "/agent/device.sock".utf8.count > 108)
        #expect {
            try DeviceAgent(stateDirectory: deep, configuration: .init(kdf: .minimal))
        } throws: { ($0 as? DeviceError)?.code == .agentFailed }
        let agent = try makeAgent(in: deep)
        try serving(agent) {
            let client = try #require(try connect(deep))
            client.disconnect()
        }
    }

    @Test("the same state directory gets the same socket path from every agent; another state directory another one")
    func socketPathFollowsTheStateDirectory() throws {
        let first = try makeAgent().socketPath
        let again = try makeAgent().socketPath
        let other = TemporaryDirectory()
        let elsewhere = try makeAgent(in: other.path).socketPath
        #expect(first == again)
        #expect(first != elsewhere)
    }

    @Test("a runtime directory others may write in, or another user's, is refused before anything is made")
    func insecureRuntimeDirectoryRefused() throws {
        let fresh = state.file("fresh")
        #expect(chmod(runtime.path, 0o777) == 0)
        #expect {
            try makeAgent(in: fresh)
        } throws: { ($0 as? SecureKeysError)?.code == .insecureStateDirectory }
        #expect(!SecureFile.exists(fresh), "the state directory was made")
        #expect(chmod(runtime.path, 0o700) == 0)
        if geteuid() == 0 {
            #expect(chown(runtime.path, 65534, 65534) == 0)
            #expect {
                try makeAgent(in: fresh)
            } throws: { ($0 as? SecureKeysError)?.code == .insecureStateDirectory }
            #expect(!SecureFile.exists(fresh))
            #expect(chown(runtime.path, 0, 0) == 0)
        }
        #expect {
            try DeviceAgent(stateDirectory: fresh, configuration: .init(kdf: .minimal, runtimeDirectory: "run/user/1000"))
        } throws: { ($0 as? DeviceError)?.code == .agentFailed }
    }

    @Test("a client refuses a named socket whose folder, or a folder above it, others may write in: nothing is sent")
    func clientChecksTheSocketsFolders() throws {
        let agent = try makeAgent()
        try serving(agent) {
            let folder = runtime.file("protected-store")
            #expect(chmod(folder, 0o777) == 0)
            #expect {
                try connect()
            } throws: { ($0 as? SecureKeysError)?.code == .insecureStateDirectory }
            #expect(chmod(folder, 0o700) == 0)
            #expect(chmod(runtime.path, 0o777) == 0)
            #expect {
                try connect()
            } throws: { ($0 as? SecureKeysError)?.code == .insecureStateDirectory }
            #expect(chmod(runtime.path, 0o700) == 0)
            #expect(agent.clientCount == 0)
            let client = try #require(try connect())
            client.disconnect()
        }
    }

    @Test("what a killed agent left is stale: clients see no agent, and the next agent of either kind replaces it")
    func staleSocketAndLocation() throws {
        // An agent that goes without stop() (killed) leaves its socket and the file naming it.
        var killed: DeviceAgent? = try makeAgent()
        let socket = try #require(killed?.socketPath)
        release(&killed)
        #expect(SecureFile.exists(socket) && SecureFile.exists(location))
        #expect(try connect() == nil)

        // The next session agent listens at the same path again.
        var next: DeviceAgent? = try makeAgent()
        #expect(next?.socketPath == socket)
        try serving(try #require(next)) {
            let client = try #require(try connect())
            client.disconnect()
        }
        release(&next)

        // A plain agent after a killed session agent: the stale name goes, clients find the plain socket.
        var dead: DeviceAgent? = try makeAgent()
        release(&dead)
        #expect(SecureFile.exists(location))
        var plain: DeviceAgent? = try DeviceAgent(stateDirectory: state.path, configuration: .init(kdf: .minimal))
        #expect(!SecureFile.exists(location))
        try serving(try #require(plain)) {
            let client = try #require(try connect())
            client.disconnect()
        }
        release(&plain)

        // A session agent after a killed plain agent: the stale plain socket goes.
        var deadPlain: DeviceAgent? = try DeviceAgent(stateDirectory: state.path, configuration: .init(kdf: .minimal))
        release(&deadPlain)
        #expect(SecureFile.exists(plainSocket))
        let session = try makeAgent()
        #expect(!SecureFile.exists(plainSocket))
        try serving(session) {
            let client = try #require(try connect())
            client.disconnect()
        }
    }

    @Test("a named socket whose runtime directory went (a logout) is no agent")
    func runtimeDirectoryGone() throws {
        var agent: DeviceAgent? = try makeAgent()
        release(&agent)
        try FileManager.default.removeItem(atPath: runtime.file("protected-store"))
        #expect(try connect() == nil)
    }

    @Test("an agent/socket-location that names no absolute socket path is state-damaged, not followed")
    func damagedLocation() throws {
        var agent: DeviceAgent? = try makeAgent()
        release(&agent)
        for damaged in ["relative/device.sock\n", "/no/newline", "/" + String(repeating: "x", count: 120) + "\n", "/a\n/b\n"] {
            try SecureFile.writeAtomically(Array(damaged.utf8), to: location, replacing: true, in: .real)
            #expect {
                try connect()
            } throws: { ($0 as? DeviceError)?.code == .deviceStateDamaged }
        }
    }

    @Test("a device set up through an agent the session holds locked comes up locked, class A and B keys already wiped")
    func heldLockedSetUp() throws {
        let agent = try DeviceAgent(
            stateDirectory: state.path, configuration: .init(kdf: .minimal, heldLocked: { true }))
        try serving(agent) {
            let client = try #require(try connect())
            defer { client.disconnect() }
            try client.setUp(passcode: try SecureBytes(utf8: "1234"), gracePeriod: .seconds(3600))
            let status = try client.status()
            #expect(status.lockState == .locked)
            #expect(status.availability.availableClasses == [.completeUntilFirstUserAuthentication, .none])
            try client.unlock(passcode: try SecureBytes(utf8: "1234"))
            #expect(try client.status().availability.isAvailable(.complete))
        }
    }
}
