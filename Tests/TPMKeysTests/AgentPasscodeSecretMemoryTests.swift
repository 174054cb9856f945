import Foundation
import TestSupport
import Testing

@testable import ProtectedData
@testable import SecureKeys
@testable import TPMKeys

/// A version-2 keybag's passcode secret and its authValue in the memory of the device agent that unsealed them:
/// neither is left where a core file would keep it.
@Suite(
    "A device agent's memory after the TPM checked a passcode", .timeLimit(.minutes(3)),
    .enabled(if: SoftwareTPM.missing == nil && geteuid() == 0, "needs swtpm, and root to read another process's memory"))
struct AgentPasscodeSecretMemoryTests {
    @Test("after a set-up, a wrong and a right passcode through the agent, no copy of the passcode secret S nor of its authValue is in what a core file of the agent would hold")
    func agentKeepsNoPasscodeSecret() async throws {
        let tpm = try SoftwareTPM()
        let directory = TemporaryDirectory()
        let agent = try await TPMAgentProcess(stateDirectory: directory.path, tcti: tpm.tcti)
        defer { agent.stop() }
        let connected = agent.client
        try connected.setUp(passcode: SecureBytes(utf8: "1234"), gracePeriod: .zero)
        try connected.lock()
        #expect(throws: DeviceError.self) { try connected.unlock(passcode: SecureBytes(utf8: "0000")) }
        try connected.unlock(passcode: SecureBytes(utf8: "1234"))

        // S and its authValue, as the test derives them from the passcode and has the TPM unseal S.
        let store = TPMDeviceKeyStore(tcti: tpm.tcti)
        let deviceKey = try store.load(from: DeviceKeyFiles(stateDirectory: directory.path))
        defer { deviceKey.wipe() }
        let keybag = try Keybag.load(from: DeviceLayout(root: directory.path, fileSystem: .real).keybagPath, deviceKey: deviceKey)
        #expect(keybag.version == 2)
        let passcodeKey = try keybag.kdf.deriveKey(from: try SecureBytes(utf8: "1234"), salt: keybag.salt)
        defer { passcodeKey.wipe() }
        let authValue = try Keybag.passcodeAuthValue(passcodeKey: passcodeKey)
        defer { authValue.wipe() }
        let secret = try store.unsealPasscodeSecret(try #require(keybag.sealedPasscodeSecret), authValue: authValue)
        defer { secret.wipe() }

        /// Where `value`, or either half of it, is in the agent's memory outside its guarded allocations.
        func copies(of value: SecureBytes) throws -> [String] {
            try value.withUnsafeBytes { bytes in
                try [bytes[...], bytes[..<16], bytes[16...]].flatMap { part in
                    try ProcessMemory.occurrences(
                        of: UnsafeRawBufferPointer(rebasing: part), inProcess: agent.process.processIdentifier, onlyDumped: true)
                }
            }.map { String($0, radix: 16) }
        }
        let unlockedSecret = try copies(of: secret)
        #expect(unlockedSecret.isEmpty, "copies of S in the unlocked agent at \(unlockedSecret)")
        let unlockedAuth = try copies(of: authValue)
        #expect(unlockedAuth.isEmpty, "copies of the authValue in the unlocked agent at \(unlockedAuth)")
        try connected.lock()
        let lockedSecret = try copies(of: secret)
        #expect(lockedSecret.isEmpty, "copies of S in the locked agent at \(lockedSecret)")
        let lockedAuth = try copies(of: authValue)
        #expect(lockedAuth.isEmpty, "copies of the authValue in the locked agent at \(lockedAuth)")
    }
}
