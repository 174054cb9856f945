import Foundation
import TestSupport
import Testing

/// What the device agent and its clients say when they cannot work together: an agent started on a directory a
/// shell holds; a shell whose agent was killed (SIGKILL) and started again (issue 30, item 9).
@Suite("Device agent messages: to the caller they concern; a killed agent is reconnected to", .timeLimit(.minutes(3)))
struct DeviceAgentMessageTests {
    @Test("device serve on a directory a shell holds tells the agent's caller to quit the shell first, not to start an agent")
    func agentOnADirectoryAShellHolds() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("s")
        let shell = try LiveProcess.shell(state: state)
        defer { shell.kill() }
        try shell.commands([])
        let agent = try ProtectedStoreBinary.run(["device", "serve", "--state-dir", state])
        #expect(agent.status != 0)
        #expect(
            agent.error.contains("state-in-use: the state directory \(state) is in use by process \(shell.processID), which opened the device itself"),
            "\(agent.error)")
        #expect(agent.error.contains("Quit it (`quit` in a shell), start the agent again, then the shell"), "\(agent.error)")
        #expect(!agent.error.contains("or start `protected-store device serve"), "\(agent.error)")
    }

    @Test("after SIGKILL, status shows no device state beside the gone agent, the error is a whole sentence, and the shell reconnects to a new agent")
    func shellReconnectsToARestartedAgent() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("s")
        let first = try LiveProcess.agent(state: state)
        let shell = try LiveProcess(["shell", "--fast-kdf", "--keep-going", "--state-dir", state])
        defer { shell.kill() }
        try shell.commands(["device setup --passcode 1234", "app launch", "put home here", "expect store ready"])
        first.kill()

        // Gone: the device's state is unknown, and nothing is available.
        let gone = try shell.commands([])
        #expect(gone.output.contains("device agent    process \(first.processID), gone: start `protected-store device serve --state-dir \(state)`"), "\(gone.output)")
        #expect(gone.output.contains("device          unknown (its agent is gone)"), "\(gone.output)")
        #expect(!gone.output.contains("device          unlocked"), "\(gone.output)")
        // A device command says what to do, in a whole sentence.
        let refused = try shell.commands(["device lock", "expect error agent-disconnected"])
        #expect(
            refused.output.contains("error: agent-disconnected: the device agent of \(state) went away (its device state is on disk). Start it again with `protected-store device serve --state-dir \(state)`: a shell or a script on the directory reconnects at its next command"),
            "\(refused.output)")

        // A new agent: the next command reconnects; the device booted, so the app that ran on the old one ended.
        let second = try LiveProcess.agent(state: state)
        defer { second.kill() }
        let back = try shell.commands(["expect device before-first-unlock", "expect store not-running"])
        #expect(back.output.contains("reconnected: the device agent (process \(first.processID)) went away, and process \(second.processID) serves \(state) now"), "\(back.output)")
        #expect(back.output.contains("device agent    process \(second.processID)\n"), "\(back.output)")
        #expect(back.errors.isEmpty, "\(back.errors)")
        let again = try shell.commands(["device unlock --passcode 1234", "app launch", "expect value home here", "expect device unlocked"])
        #expect(again.errors.isEmpty, "\(again.errors)")
        #expect(shell.finish() == 0, "\(shell.printed) \(shell.errors)")
    }
}
