import TestSupport
import Foundation
import ProtectedStore
import SecureKeys
import Testing

@testable import ProtectedStoreHarness

@MainActor
@Suite("Secrets in output", .timeLimit(.minutes(3)))
struct SecretsInOutputTests {
    final class Lines {
        var all: [String] = []
    }

    /// The ways a 32-byte key could be written into text.
    func spellings(of key: SecureBytes) throws -> [String] {
        try key.withUnsafeBytes { bytes in
            let hex = Array(bytes).hex
            return [hex, hex.uppercased(), Data(bytes).base64EncodedString(), String(decoding: bytes, as: UTF8.self)]
        }
    }

    @Test("no passcode (right, wrong or new) and no key, in any spelling, appears in any line a session prints, errors and failed expectations included")
    func noSecretInAnyLine() async throws {
        let directory = TemporaryDirectory()
        let lines = Lines()
        let session = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal) { lines.all.append($0) }
        let passcode = "right-7731-passcode", wrong = "wrong-5521-guess", newPasscode = "new-9043-passcode"
        let script = [
            "device setup --passcode \(passcode) --grace 10s", "app launch --protection complete", "put a 1",
            "inbox put b 2", "status", "device lock", "clock advance 11s", "get a", "status",
            "device unlock --passcode \(wrong)", "device unlock --passcode \(wrong)",
            "device change-passcode --old \(wrong) --new \(newPasscode)", "status",
            "device unlock --passcode \(passcode)", "device change-passcode --old \(passcode) --new \(newPasscode)",
            "expect value a not-this", "expect device locked", "app crash", "device reboot",
            "device unlock --passcode \(passcode)", "device unlock --passcode \(newPasscode)", "app launch", "get b", "status",
        ]
        for line in script {
            let command = try #require(try ScenarioParser.parse(line))
            if let failure = await session.execute(command) { lines.all.append(failure.description) }
        }

        // Every key the device and the store hold now.
        let device = try #require(session.device)
        var keys = ProtectionClass.allCases.compactMap { device.classKey($0) }
        let storePath = try #require(session.controller?.configuration.store.path)
        if case .available(let storeKey) = try device.lookUpStoreKey(forStoreAt: storePath) { keys.append(storeKey) }
        #expect(keys.count == 5, "four class keys and the store key")

        // A damaged store key file and a wrong-passcode error must not echo what they read either.
        let keyFile = storePath + ".key"
        var damaged = try #require(FileManager.default.contents(atPath: keyFile))
        damaged[damaged.count - 1] ^= 0x01
        try damaged.write(to: URL(fileURLWithPath: keyFile))
        for line in ["app terminate", "app launch", "status"] {
            if let failure = await session.execute(try #require(try ScenarioParser.parse(line))) { lines.all.append(failure.description) }
        }

        let text = lines.all.joined(separator: "\n")
        #expect(text.contains("wrong-passcode"), "the wrong passcode was reported")
        #expect(text.contains("key-damaged") || text.contains("damaged"), "the damaged key file was reported: \(text.suffix(400))")
        for secret in [passcode, wrong, newPasscode] {
            #expect(!text.contains(secret), "a passcode appears in the output")
        }
        for key in keys {
            for spelling in try spellings(of: key) where spelling.count >= 16 {
                #expect(!text.contains(spelling), "a key appears in the output")
            }
        }
    }
}
