import Foundation
import Logging
@_spi(Testing) import ProtectedStore
import SecureKeys
import Testing
import TestSupport

@testable import ProtectedStoreHarness

/// Every log line any ProtectedStore logger writes while a capture is recording, as text: level, label,
/// message, metadata. One per test process, since swift-log's system can be bootstrapped once.
/// `@unchecked Sendable`: `recording` and `lines` are read and written only under `lock`. An `NSLock` (a
/// pthread mutex) rather than `Synchronization.Mutex`, whose futex ThreadSanitizer cannot see on Linux.
final class LogCapture: @unchecked Sendable {
    static let shared: LogCapture = {
        let capture = LogCapture()
        LoggingSystem.bootstrap { label in CapturingLogHandler(label: label, capture: capture) }
        return capture
    }()

    private let lock = NSLock()
    private var recording = false
    private var lines: [String] = []

    var isRecording: Bool { lock.withLock { recording } }

    func record(_ line: String) {
        lock.withLock { if recording { lines.append(line) } }
    }

    /// Sets every logger to `trace` and starts recording, from nothing.
    func start() {
        lock.withLock {
            recording = true
            lines = []
        }
    }

    /// Stops recording; returns what was logged since ``start()`` (by the test and by any test running beside
    /// it: more lines, never fewer).
    func stop() -> [String] {
        lock.withLock {
            recording = false
            return lines
        }
    }
}

/// An in-memory `LogHandler`: at `trace` while its capture records, `critical` (nearly silent) otherwise.
struct CapturingLogHandler: LogHandler {
    let label: String
    let capture: LogCapture
    var metadata: Logger.Metadata = [:]

    var logLevel: Logger.Level {
        get { capture.isRecording ? .trace : .critical }
        set {}
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        capture.record("\(event.level) \(label) \(event.message) \(fields)")
    }
}

@MainActor
@Suite("Secrets in logs", .timeLimit(.minutes(3)))
struct SecretsInLogsTests {
    /// The ways a 32-byte key could be written into text.
    func spellings(of key: SecureBytes) throws -> [String] {
        try key.withUnsafeBytes { bytes in
            let hex = Array(bytes).hex
            return [hex, hex.uppercased(), Data(bytes).base64EncodedString(), String(decoding: bytes, as: UTF8.self)]
        }
    }

    @Test("at trace level, no log line holds a passcode, a key in any spelling, or a stored key or value")
    func noSecretInAnyLogLine() async throws {
        let directory = TemporaryDirectory()
        let passcode = "right-4471-passcode", wrong = "wrong-8812-guess", newPasscode = "new-3390-passcode"
        let storedKey = "diary-entry-key-5521", storedValue = "met-Alice-at-the-harbour-9917"
        let inboxKey = "location-key-2231", inboxValue = "lat-48.8584-lon-2.2945-7781"
        var keys: [SecureBytes] = []
        LogCapture.shared.start()
        defer { _ = LogCapture.shared.stop() }
        // Kept until the keys are compared: releasing the device wipes its keys.
        let current = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal) { _ in }
        do {
            let script = [
                "device setup --passcode \(passcode) --grace 10s", "app launch --protection complete",
                "put \(storedKey) \(storedValue)", "get \(storedKey)", "device lock", "clock advance 11s",
                "inbox put \(inboxKey) \(inboxValue)", "get \(storedKey)",
                "device unlock --passcode \(wrong)", "clock advance 1m", "device unlock --passcode \(passcode)",
                "get \(inboxKey)", "device change-passcode --old \(passcode) --new \(newPasscode)",
                "app terminate", "device reboot", "app launch", "device unlock --passcode \(newPasscode)",
                "get \(storedKey)", "status",
            ]
            for line in script {
                let command = try #require(try ScenarioParser.parse(line))
                _ = await current.execute(command)
            }
            await current.controller?.waitUntilIdle()
            let device = try #require(current.device)
            keys = ProtectionClass.allCases.compactMap { device.classKey($0) }
            let storePath = try #require(current.controller?.configuration.store.path)
            if case .available(let storeKey) = try device.lookUpStoreKey(forStoreAt: storePath) { keys.append(storeKey) }
        }
        let lines = LogCapture.shared.stop()
        #expect(keys.count == 5, "four class keys and the store key")

        let text = lines.joined(separator: "\n")
        // The capture saw the flow, at every subsystem that took part, so an empty capture cannot pass.
        for label in ["launch", "device", "store", "inbox"] {
            #expect(text.contains("protected-store.\(label)"), "nothing logged by protected-store.\(label)")
        }
        #expect(text.contains("phase changed"))
        for secret in [passcode, wrong, newPasscode, storedKey, storedValue, inboxKey, inboxValue] {
            #expect(!text.contains(secret), "a secret appears in the log: \(secret)")
        }
        for key in keys {
            for spelling in try spellings(of: key) where spelling.count >= 16 {
                #expect(!text.contains(spelling), "a key appears in the log")
            }
        }
    }
}
