import Foundation
import Testing

@testable import ProtectedData

/// A `protected-store device serve` process on a software TPM, and a client connected to it: the agent whose memory
/// the memory tests scan. Killed (SIGKILL) and waited for by ``stop()``.
struct TPMAgentProcess {
    /// The binary, built into the test bundle's folder.
    static let binary = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        .appendingPathComponent("protected-store").path

    let process: Process
    let client: DeviceAgentClient

    /// Starts an agent serving `stateDirectory` with its device key in the TPM at `tcti`, and connects to it
    /// (retrying for up to 10 s while it starts).
    init(stateDirectory: String, tcti: String) async throws {
        let agent = Process()
        agent.executableURL = URL(fileURLWithPath: Self.binary)
        agent.arguments = ["device", "serve", "--fast-kdf", "--state-dir", stateDirectory, "--key-store", "tpm", "--tpm-tcti", tcti]
        agent.standardOutput = FileHandle.nullDevice
        agent.standardError = FileHandle.nullDevice
        try agent.run()
        var client: DeviceAgentClient?
        for _ in 0..<500 where client == nil {
            client = try? DeviceAgentClient.connect(toAgentOf: stateDirectory, clientName: "test")
            if client == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        guard let client else {
            kill(agent.processIdentifier, SIGKILL)
            agent.waitUntilExit()
            throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "no device agent answered for \(stateDirectory)"])
        }
        self.process = agent
        self.client = client
    }

    /// Disconnects, then kills the agent and waits for it.
    func stop() {
        client.disconnect()
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}
