import TestSupport
import Foundation
import Testing

/// The device state file as a hostile user or bad luck leaves it, seen through the real tool.
@Suite("Device state through the tool: a tampered counter is refused, never a crash")
struct DeviceStateCommandLineTests {
    @Test("a state.json with failedPasscodeAttempts = Int64.max (an untagged version-1 file) makes the tool say device-state-damaged, naming the field; it no longer traps on the next wrong passcode")
    func hugeCounterIsRefusedNotATrap() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        let setUp = try ProtectedStoreBinary.shell(["device setup --passcode 1234"], state: state)
        #expect(setUp.status == 0, "\(setUp.error)")
        let legacy = """
            {"formatVersion": 1, "gracePeriodMilliseconds": 10000, "failedPasscodeAttempts": 9223372036854775807, "wiped": false}
            """
        try Data(legacy.utf8).write(to: URL(fileURLWithPath: state + "/device/state.json"))
        let result = try ProtectedStoreBinary.shell(["device unlock --passcode 0"], state: state)
        #expect(result.status != 132 && result.status != 4, "the tool trapped (status \(result.status))")
        let said = result.output + result.error
        #expect(said.contains("device-state-damaged"), "\(said)")
        #expect(said.contains("failedPasscodeAttempts"), "\(said)")
    }

    @Test("simulate --plant wipe-not-rolled-forward is a plant the tool knows")
    func wipePlantExists() throws {
        let directory = TemporaryDirectory()
        let result = try ProtectedStoreBinary.run(
            ["simulate", "--plant", "wipe-not-rolled-forward", "--seeds", "1", "--steps", "5", "--no-progress", "--output", directory.path])
        #expect(!result.error.contains("is invalid for '--plant'"), "\(result.error)")
        #expect(result.status == 0 || result.status == 1, "status \(result.status): \(result.error)")
    }
}
