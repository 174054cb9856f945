import Foundation
import SecureKeys
import TestSupport
import Testing

@testable import ProtectedData
@testable import TPMKeys

/// The device key of a TPM device, in the memory of the device agent that set it up: only in guarded memory,
/// which a core file leaves out.
@Suite(
    "A device agent's memory after it sealed its device key in the TPM", .timeLimit(.minutes(3)),
    .enabled(if: SoftwareTPM.missing == nil && geteuid() == 0, "needs swtpm, and root to read another process's memory"))
struct AgentDeviceKeyMemoryTests {
    @Test("a device set up through the agent with the TPM store leaves no copy of its key in what a core file of the agent would hold, unlocked nor locked")
    func agentKeepsTheKeyOnlyInGuardedMemory() async throws {
        let tpm = try SoftwareTPM()
        let directory = TemporaryDirectory()
        let agent = try await TPMAgentProcess(stateDirectory: directory.path, tcti: tpm.tcti)
        defer { agent.stop() }
        let connected = agent.client
        // The agent seals the key on the client's thread, and keeps the device unlocked.
        try connected.setUp(passcode: SecureBytes(utf8: "1234"), gracePeriod: .zero)
        let key = try TPMDeviceKeyStore(tcti: tpm.tcti).load(from: DeviceKeyFiles(stateDirectory: directory.path))
        defer { key.wipe() }
        /// Where the key, or either half of it, is in the agent's memory outside its guarded allocations.
        func copies() throws -> [String] {
            try key.withUnsafeBytes { bytes in
                try [bytes[...], bytes[..<16], bytes[16...]].flatMap { part in
                    try ProcessMemory.occurrences(
                        of: UnsafeRawBufferPointer(rebasing: part), inProcess: agent.process.processIdentifier, onlyDumped: true)
                }
            }.map { String($0, radix: 16) }
        }
        let unlocked = try copies()
        #expect(unlocked.isEmpty, "copies of the device key in the unlocked agent at \(unlocked)")
        try connected.lock()
        let locked = try copies()
        #expect(locked.isEmpty, "copies of the device key in the locked agent at \(locked)")
    }
}
