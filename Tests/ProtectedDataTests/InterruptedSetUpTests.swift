import TestSupport
import Foundation
import SecureKeys
import Testing

@testable import ProtectedData

/// A set-up that stopped part-way — a full disk, a crash — between its first key file and its state file.
@Suite("Simulated device: an interrupted set-up")
struct InterruptedSetUpTests {
    let directory = TemporaryDirectory()
    var layout: DeviceLayout { DeviceLayout(root: directory.path, fileSystem: .real) }

    func setUp() throws -> KeybagDevice {
        try KeybagDevice.setUp(in: directory.path, passcode: try SecureBytes(utf8: "1234"), configuration: .init(kdf: .minimal))
    }

    /// What a set-up that stopped after its key files and before its state file leaves.
    func interruptedSetUp() throws {
        let device = try setUp()
        device.powerOff()
        try FileManager.default.removeItem(atPath: layout.statePath)
        try Data().write(to: URL(fileURLWithPath: layout.setUpMarkerPath))
    }

    @Test("a set-up that stopped part-way boots as no-device, saying so, and a new set-up replaces what it left")
    func setUpAgainAfterAnInterruptedOne() throws {
        try interruptedSetUp()
        #expect {
            try KeybagDevice(bootingFrom: directory.path)
        } throws: { error in
            let error = error as? DeviceError
            return error?.code == .noDevice && error?.message.contains("stopped part-way") == true
        }
        let device = try setUp()
        #expect(device.lockState == .unlocked)
        #expect(!FileManager.default.fileExists(atPath: layout.setUpMarkerPath), "the marker outlived the set-up")
        device.powerOff()
        let booted = try KeybagDevice(bootingFrom: directory.path)
        try booted.unlock(passcode: try SecureBytes(utf8: "1234"))
    }

    @Test("key files without a state file and without the set-up marker are a device's: set-up refuses, nothing is removed")
    func keysWithoutMarkerAreNeverRemoved() throws {
        try setUp().powerOff()
        try FileManager.default.removeItem(atPath: layout.statePath)
        let keybag = try Data(contentsOf: URL(fileURLWithPath: layout.keybagPath))
        #expect(throws: DeviceError.self) { try setUp() }
        #expect(try Data(contentsOf: URL(fileURLWithPath: layout.keybagPath)) == keybag)
        #expect(FileManager.default.fileExists(atPath: layout.deviceKeyPath))
    }
}
