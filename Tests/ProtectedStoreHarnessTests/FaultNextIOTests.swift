import TestSupport
import Foundation
import ProtectedData
import ProtectedStore
import SecureKeys
import Testing

@testable import ProtectedStoreHarness

/// `fault next-io`: the command language's way into the fault plan, for scripts and the simulator.
@Suite("fault next-io")
@MainActor
struct FaultNextIOTests {
    @Test("a bad fault line is refused with what is wrong")
    func badLinesAreRefused() throws {
        for line in [
            "fault", "fault now ENOSPC", "fault next-io", "fault next-io ENOSPACE", "fault next-io EIO --mode drop",
            "fault next-io short-write --seed 3", "fault next-io ENOSPC --after -1", "fault next-io ENOSPC --after x",
            "fault next-io power-cut --mode sideways", "fault next-io power-cut --seed -1", "fault next-io EIO extra",
        ] {
            #expect(throws: ScenarioParseError.self, "\(line)") { try ScenarioParser.parse(line) }
        }
        #expect(try ScenarioParser.parse("fault next-io power-cut") == .faultNextIO(.init(.powerCut(.drop, seed: 0))))
    }

    /// Runs `lines` in a session; returns the failed expectations.
    func run(_ lines: [String], in session: ScenarioSession) async throws -> [String] {
        var failures: [String] = []
        for line in lines {
            if let failure = await session.execute(try #require(try ScenarioParser.parse(line))) { failures.append("\(line): \(failure)") }
        }
        return failures
    }

    @Test("the plan covers only the next command, counts its calls through DiskIO and SQLite alike, and is kept for the simulator")
    func planCoversTheNextCommand() async throws {
        let directory = TemporaryDirectory()
        let session = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal) { _ in }
        #expect(try await run(["device setup --passcode 1234", "app launch", "put a 1", "app terminate"], in: session).isEmpty)
        #expect(try await run(["fault next-io short-write --persistent"], in: session).isEmpty)
        #expect(session.plannedFault != nil && session.lastFault == nil, "planned, not yet armed")
        #expect(try await run(["inbox put b 2", "expect error disk-full"], in: session).isEmpty)
        let plan = try #require(session.lastFault)
        #expect(session.plannedFault == nil && !plan.isArmed && plan.fired)
        #expect(plan.failures.first?.call == .write && plan.failures.first?.path.hasSuffix("app.sqlite.inbox") == true)
        #expect(try await run(["app launch", "put c 3", "expect error none", "expect value c 3", "expect value a 1"], in: session).isEmpty)
        #expect(session.lastFault === plan, "the next command ran under no plan")
    }

    @Test("issue 26 finding 1 as a script: after a short inbox append, the next acknowledged one survives the merge")
    func shortAppendThenAcknowledgedAppend() async throws {
        let directory = TemporaryDirectory()
        let session = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal) { _ in }
        let setUp = ["device setup --passcode 1234", "app launch", "put a 1", "app terminate", "device lock"]
        #expect(try await run(setUp, in: session).isEmpty)
        #expect(try await run(["fault next-io short-write", "inbox put b 2", "expect error disk-full"], in: session).isEmpty)
        #expect(try await run(["inbox put c 3", "expect error none"], in: session).isEmpty)
        let merged = try await run(["device unlock --passcode 1234", "app launch", "expect store ready", "expect value a 1"], in: session)
        #expect(merged.isEmpty)
        let lost = try await run(["expect value c 3"], in: session)
        // Issue 26 finding 1, fixed on the inbox branch (an append finds the file's end from its tail).
        #expect(lost.isEmpty, "\(lost)")
    }

    @Test("a wrong passcode is still counted after a reboot when its counter's write failed, and an erase stays erased (found by the simulator)")
    func failedAttemptSurvivesReboot() async throws {
        let directory = TemporaryDirectory()
        let session = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal) { _ in }
        let setUp = ["device setup --passcode 1234 --wipe-after 4", "device lock"]
            + Array(repeating: "device unlock --passcode 0000", count: 3)
        #expect(try await run(setUp, in: session).isEmpty)
        // An attempt whose count cannot be written (the state file's fsync, its third call) is refused unchecked:
        // not counted, not evaluated — and a reboot gives nothing back.
        #expect(try await run(["fault next-io ENOSPC --after 2", "device unlock --passcode 0000", "expect error disk-full"], in: session).isEmpty)
        #expect(try await run(["device reboot", "expect device before-first-unlock"], in: session).isEmpty)
        // The erasing attempt, counted, then its erase cut off at the keybag's removal (its eleventh call): the
        // device is erased in memory at once, and the reboot finishes the erase on disk.
        #expect(try await run(["fault next-io EIO --after 10 --persistent", "device unlock --passcode 0000", "expect device wiped"], in: session).isEmpty)
        let afterReboot = try await run(["device reboot", "expect device wiped"], in: session)
        #expect(afterReboot.isEmpty, "\(afterReboot)")
        #expect(!FileManager.default.fileExists(atPath: directory.file("state/device/device.keybag")))
        #expect(!FileManager.default.fileExists(atPath: directory.file("state/hardware/uid.key")))
    }

    @Test("an acknowledged append survives a power cut after an append that created the inbox and failed at its sync (found by the simulator, seed 1150)")
    func appendAfterFailedCreatingAppendSurvivesCut() async throws {
        let directory = TemporaryDirectory()
        let session = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal) { _ in }
        let setUp = ["device setup --passcode 1234 --grace 10s", "app launch --background --reason background-fetch", "device reboot"]
        #expect(try await run(setUp, in: session).isEmpty)
        // Its third call, the new inbox's fsync, fails: the file is there, its folder entry never synced.
        #expect(try await run(["fault next-io EIO --after 2 --persistent", "inbox put a 1", "expect error io-error"], in: session).isEmpty)
        let acknowledged = try await run(["inbox put e 2", "expect error none", "expect inbox 2"], in: session)
        #expect(acknowledged.isEmpty, "\(acknowledged)")
        // The acknowledged record is there after the cut (the failed one too: its cut-back failed under the
        // persistent fault, and the next append's fsync made the file durable with it).
        let afterCut = try await run(
            ["device power-cut --mode torn-sequence --seed 650303", "device unlock --passcode 1234", "app launch", "expect store ready",
             "expect value e 2"], in: session)
        #expect(afterCut.isEmpty, "\(afterCut)")
    }
}
