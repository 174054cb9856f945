import TestSupport
import Foundation
import ProtectedStore
import Testing

@testable import ProtectedStoreHarness

@MainActor
@Suite("Inbox damage through the command language", .timeLimit(.minutes(3)))
struct InboxDamageScenarioTests {
    /// A damaged first record among three, then an attach: only the damaged one may be lost.
    static let damagedFirstRecord = """
        device setup --passcode 1234
        app launch
        app terminate
        device reboot
        inbox put a 1
        inbox put b 2
        inbox put c 3
        damage inbox length 0 4194352
        app launch --background --reason location
        device unlock --passcode 1234
        expect store ready
        expect value b 2
        expect value c 3
        expect inbox-damaged 119
        """

    @Test("the planted merge-truncates-unread bug loses the intact records after a damaged one; without it they merge")
    func plantedMergeTruncatesUnread() async throws {
        let script = try ScenarioScript(name: "damaged-first-record", text: Self.damagedFirstRecord)
        let directory = TemporaryDirectory()
        let planted = try ScenarioSession(stateDirectory: directory.file("planted"), kdf: .minimal, output: { _ in })
        planted.plantedFault = .mergeTruncatesUnread
        let failure = await script.run(in: planted)
        #expect(failure != nil, "the planted bug loses b and c")
        let clean = try ScenarioSession(stateDirectory: directory.file("clean"), kdf: .minimal, output: { _ in })
        let cleanFailure = await script.run(in: clean)
        #expect(cleanFailure == nil, "\(String(describing: cleanFailure))")
    }

    @Test("damage refuses an offset past the end of the file with invalid-argument, and a file that does not exist")
    func damageChecksItsArguments() async throws {
        let script = try ScenarioScript(name: "damage-arguments", text: """
            device setup --passcode 1234
            damage inbox truncate-tail 1
            expect error invalid-argument
            app launch
            app terminate
            inbox put a 1
            damage inbox byte 119 flip
            expect error invalid-argument
            damage inbox byte 118 set 0x41
            expect error none
            expect inbox 1
            """)
        let directory = TemporaryDirectory()
        let session = try ScenarioSession(stateDirectory: directory.file("state"), kdf: .minimal, output: { _ in })
        let failure = await script.run(in: session)
        #expect(failure == nil, "\(String(describing: failure))")
    }
}
