import Foundation
import TestSupport
import Testing

/// `--key-store` on the session commands and `device migrate-key`, against a software TPM of the test's own.
@Suite("Command line: the device key in a TPM", .enabled(if: SoftwareTPM.missing == nil, "\(SoftwareTPM.missing ?? "")"))
struct KeyStoreCommandLineTests {
    @Test("a file device's key moves into the TPM with `device migrate-key`; the store opens with --key-store tpm, and auto, after it")
    func migrateKeyThenBootWithTheTPM() throws {
        let tpm = try SoftwareTPM()
        let state = TemporaryDirectory()
        let uidKey = state.file("hardware/uid.key")
        let uidTPM = state.file("hardware/uid.tpm")
        let setUp = try ProtectedStoreBinary.shell(["device setup --passcode 1", "app launch", "put k v", "app terminate"], state: state.path)
        #expect(setUp.status == 0, "\(setUp.output) \(setUp.error)")
        #expect(FileManager.default.fileExists(atPath: uidKey))

        let keybag = state.file("device/device.keybag")
        let arguments = ["device", "migrate-key", "--state-dir", state.path, "--to", "tpm", "--tpm-tcti", tpm.tcti]
        // No passcode typed: the key moves, the keybag stays version 1, and the command says so and fails.
        let migrate = try ProtectedStoreBinary.run(arguments)
        #expect(migrate.status != 0, "\(migrate.output) \(migrate.error)")
        #expect(migrate.output.contains("TPM present at \(tpm.tcti) (manufacturer IBM)"), "\(migrate.output)")
        #expect(migrate.output.contains("migrated: the device key is sealed in hardware/uid.tpm"), "\(migrate.output)")
        #expect(migrate.error.contains("The keybag stays version 1"), "\(migrate.error)")
        #expect(!FileManager.default.fileExists(atPath: uidKey))
        #expect(FileManager.default.fileExists(atPath: uidTPM))
        let v1 = try Data(contentsOf: URL(fileURLWithPath: keybag))
        #expect(v1[4] == 1)

        // A wrong passcode is refused and changes nothing; the right one moves the keybag to version 2.
        let wrong = try ProtectedStoreBinary.run(arguments, input: "0\n")
        #expect(wrong.status != 0 && wrong.error.contains("wrong-passcode"), "\(wrong.output) \(wrong.error)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: keybag)) == v1)
        let moved = try ProtectedStoreBinary.run(arguments, input: "1\n")
        #expect(moved.status == 0, "\(moved.output) \(moved.error)")
        #expect(moved.output.contains("already-migrated"), "\(moved.output)")
        #expect(moved.output.contains("keybag: moved to version 2"), "\(moved.output)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: keybag))[4] == 2)

        let again = try ProtectedStoreBinary.run(arguments)
        #expect(again.status == 0, "\(again.output) \(again.error)")
        #expect(again.output.contains("already-migrated"), "\(again.output) \(again.error)")
        #expect(again.output.contains("keybag: version 2 already"), "\(again.output)")

        // The default (file) store is refused with the advice; tpm and auto open the store.
        let lines = ["device unlock --passcode 1", "app launch", "expect store ready", "expect value k v"]
        let withFile = try ProtectedStoreBinary.run(["shell", "--fast-kdf", "--state-dir", state.path], input: lines.joined(separator: "\n") + "\n")
        #expect(withFile.status != 0)
        #expect((withFile.output + withFile.error).contains("key-store-mismatch"), "\(withFile.output) \(withFile.error)")
        for choice in ["tpm", "auto"] {
            let opened = try ProtectedStoreBinary.run(
                ["shell", "--fast-kdf", "--state-dir", state.path, "--key-store", choice, "--tpm-tcti", tpm.tcti],
                input: lines.joined(separator: "\n") + "\n")
            #expect(opened.status == 0 && !opened.output.contains("FAILED"), "\(choice): \(opened.output) \(opened.error)")
        }
    }

    /// Runs a stock tpm2-tools command on `tpm`: its status and standard output.
    static func tpm2(_ tool: String, _ arguments: [String], tpm: SoftwareTPM) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/" + tool)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["TPM2TOOLS_TCTI"] = tpm.tcti
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    @Test("on a TPM device three wrong passcodes in the shell raise the TPM's TPM2_PT_LOCKOUT_COUNTER to 3 (tpm2_getcap), and the right one opens the store")
    func wrongPasscodesAreCountedByTheTPM() throws {
        let tpm = try SoftwareTPM()
        let state = TemporaryDirectory()
        // swtpm allows 3 failures before its lockout: 5 here, so the right passcode is checked after three wrong ones.
        let limits = try Self.tpm2("tpm2_dictionarylockout", ["--setup-parameters", "--max-tries=5", "--recovery-time=1000"], tpm: tpm)
        try #require(limits.status == 0)
        let shell = ["shell", "--fast-kdf", "--state-dir", state.path, "--key-store", "tpm", "--tpm-tcti", tpm.tcti]
        let setUp = try ProtectedStoreBinary.run(shell, input: "device setup --passcode 1\napp launch\nput k v\napp terminate\n")
        #expect(setUp.status == 0 && !setUp.output.contains("FAILED"), "\(setUp.output) \(setUp.error)")
        #expect(try Self.tpm2("tpm2_getcap", ["properties-variable"], tpm: tpm).output.contains("TPM2_PT_LOCKOUT_COUNTER: 0x0"))

        let wrong = try ProtectedStoreBinary.run(
            shell, input: String(repeating: "device unlock --passcode 0\nexpect error wrong-passcode\n", count: 3))
        #expect(wrong.status == 0 && !wrong.output.contains("FAILED"), "\(wrong.output) \(wrong.error)")
        let counter = try Self.tpm2("tpm2_getcap", ["properties-variable"], tpm: tpm).output
        #expect(counter.contains("TPM2_PT_LOCKOUT_COUNTER: 0x3"), "\(counter)")

        let right = try ProtectedStoreBinary.run(
            shell, input: "device unlock --passcode 1\nexpect error none\napp launch\nexpect store ready\nexpect value k v\n")
        #expect(right.status == 0 && !right.output.contains("FAILED"), "\(right.output) \(right.error)")
    }

    @Test("`device migrate-key` with no TPM says so, exits non-zero, and leaves uid.key; --to file is refused")
    func migrateKeyWithoutATPM() throws {
        let state = TemporaryDirectory()
        let setUp = try ProtectedStoreBinary.shell(["device setup --passcode 1"], state: state.path)
        #expect(setUp.status == 0)
        let migrate = try ProtectedStoreBinary.run(
            ["device", "migrate-key", "--state-dir", state.path, "--to", "tpm", "--tpm-tcti", "device:/nonexistent/tpmrm0"])
        #expect(migrate.status != 0)
        #expect(migrate.output.contains("TPM absent at device:/nonexistent/tpmrm0"), "\(migrate.output)")
        #expect(migrate.error.contains("tpm-unavailable"), "\(migrate.error)")
        #expect(!migrate.error.contains("ERROR:tcti"), "tpm2-tss's own log reached the user: \(migrate.error)")
        #expect(FileManager.default.fileExists(atPath: state.file("hardware/uid.key")))
        let back = try ProtectedStoreBinary.run(["device", "migrate-key", "--state-dir", state.path, "--to", "file"])
        #expect(back.status != 0)
        #expect(back.error.contains("--to must be tpm"), "\(back.error)")
    }

    @Test("`shell --key-store tpm` sets up a device whose key only the TPM keeps")
    func setUpWithTheTPM() throws {
        let tpm = try SoftwareTPM()
        let state = TemporaryDirectory()
        let result = try ProtectedStoreBinary.run(
            ["shell", "--fast-kdf", "--state-dir", state.path, "--key-store", "tpm", "--tpm-tcti", tpm.tcti],
            input: "device setup --passcode 1\ndevice reboot\ndevice unlock --passcode 1\napp launch\nexpect store ready\n")
        #expect(result.status == 0 && !result.output.contains("FAILED"), "\(result.output) \(result.error)")
        #expect(FileManager.default.fileExists(atPath: state.file("hardware/uid.tpm")))
        #expect(!FileManager.default.fileExists(atPath: state.file("hardware/uid.key")))
    }

    @Test("a plain shell on a TPM device whose agent was killed says to start the agent, not only key-store-mismatch")
    func killedAgentIsNamed() throws {
        let tpm = try SoftwareTPM()
        let state = TemporaryDirectory()
        let setUp = try ProtectedStoreBinary.run(
            ["shell", "--fast-kdf", "--state-dir", state.path, "--key-store", "tpm", "--tpm-tcti", tpm.tcti],
            input: "device setup --passcode 1\n")
        #expect(setUp.status == 0, "\(setUp.output) \(setUp.error)")
        let agent = try LiveProcess(
            ["device", "serve", "--fast-kdf", "--state-dir", state.path, "--key-store", "tpm", "--tpm-tcti", tpm.tcti])
        try agent.waitFor("serves")
        agent.kill()
        let shell = try ProtectedStoreBinary.run(["shell", "--fast-kdf", "--state-dir", state.path], input: "device unlock --passcode 1\n")
        let said = shell.output + shell.error
        #expect(shell.status != 0)
        #expect(said.contains("key-store-mismatch"), "\(said)")
        #expect(said.contains("its device agent is not running: start it"), "\(said)")
    }

    @Test("`session status` says which key source a device uses — the TPM, or a file with the command that moves it — and what a new device would use")
    func sessionStatusNamesTheKeySource() throws {
        let tpm = try SoftwareTPM()
        let noBus = ["--bus-address", "unix:path=/nonexistent/bus", "--no-session-bus"]
        let sealed = TemporaryDirectory()
        let plain = TemporaryDirectory()
        for (state, store) in [(sealed, "tpm"), (plain, "file")] {
            let setUp = try ProtectedStoreBinary.run(
                ["shell", "--fast-kdf", "--state-dir", state.path, "--key-store", store, "--tpm-tcti", tpm.tcti],
                input: "device setup --passcode 1\n")
            #expect(setUp.status == 0, "\(setUp.output) \(setUp.error)")
        }
        let ofSealed = try ProtectedStoreBinary.run(["session", "status", "--state-dir", sealed.path] + noBus)
        #expect(ofSealed.output.contains("key source: tpm (\(sealed.path)/hardware/uid.tpm, sealed by the TPM)"), "\(ofSealed.output)")
        let ofPlain = try ProtectedStoreBinary.run(["session", "status", "--state-dir", plain.path] + noBus)
        #expect(ofPlain.output.contains("key source: file (\(plain.path)/hardware/uid.key"), "\(ofPlain.output)")
        #expect(ofPlain.output.contains("device migrate-key --to tpm"), "\(ofPlain.output)")
        let newWithTPM = try ProtectedStoreBinary.run(["session", "status", "--tpm-tcti", tpm.tcti] + noBus)
        #expect(newWithTPM.output.contains("key source: tpm for a new device (TPM present at \(tpm.tcti)"), "\(newWithTPM.output)")
        let newWithout = try ProtectedStoreBinary.run(["session", "status", "--tpm-tcti", "device:/nonexistent/tpmrm0"] + noBus)
        #expect(newWithout.output.contains("key source: file for a new device (TPM absent at device:/nonexistent/tpmrm0"), "\(newWithout.output)")
    }

    @Test("a device set up through the shipped user unit's `device serve` with a TPM present gets uid.tpm, not uid.key")
    func agentSetsUpOnTheTPM() throws {
        let tpm = try SoftwareTPM()
        let state = TemporaryDirectory()
        let agent = try LiveProcess(try Self.unitAgentArguments(stateDirectory: state.path) + ["--fast-kdf", "--tpm-tcti", tpm.tcti])
        try agent.waitFor("serves")
        let client = try ProtectedStoreBinary.run(
            ["shell", "--state-dir", state.path],
            input: "device setup --passcode 1\napp launch\nexpect store ready\nput k v\napp terminate\n")
        #expect(client.status == 0 && !client.output.contains("FAILED"), "\(client.output) \(client.error)")
        agent.kill()
        #expect(FileManager.default.fileExists(atPath: state.file("hardware/uid.tpm")))
        #expect(!FileManager.default.fileExists(atPath: state.file("hardware/uid.key")))
        #expect(!agent.errors.contains("no TPM"), "\(agent.errors)")
    }

    /// The arguments the shipped user unit (Support/systemd/protected-store-device.service) starts the tool
    /// with, on `stateDirectory`, without `--session` (no logind here: the key store does not depend on it).
    static func unitAgentArguments(stateDirectory: String) throws -> [String] {
        let unit = try String(
            contentsOfFile: SQLCipher4Oracle.packageRoot + "/Support/systemd/protected-store-device.service", encoding: .utf8)
        let line = try #require(unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
        var arguments = line.split(separator: " ").dropFirst().map(String.init)
        arguments.removeAll { $0 == "--session" }
        let stateOption = try #require(arguments.firstIndex(of: "--state-dir"))
        arguments[stateOption + 1] = stateDirectory
        #expect(Array(arguments.prefix(2)) == ["device", "serve"], "\(line)")
        return arguments
    }

    @Test("after `device migrate-key --to tpm`, a default `device serve` boots the device from the TPM: no key-store-mismatch, the store opens")
    func agentBootsAMigratedDevice() throws {
        let tpm = try SoftwareTPM()
        let state = TemporaryDirectory()
        let setUp = try ProtectedStoreBinary.shell(["device setup --passcode 1", "app launch", "put k v", "app terminate"], state: state.path)
        #expect(setUp.status == 0, "\(setUp.output) \(setUp.error)")
        // The passcode moves the keybag to version 2 with the key.
        let migrate = try ProtectedStoreBinary.run(
            ["device", "migrate-key", "--state-dir", state.path, "--to", "tpm", "--tpm-tcti", tpm.tcti], input: "1\n")
        #expect(migrate.status == 0, "\(migrate.output) \(migrate.error)")
        let agent = try LiveProcess(["device", "serve", "--fast-kdf", "--state-dir", state.path, "--tpm-tcti", tpm.tcti])
        defer { agent.kill() }
        try agent.waitFor("serves", timeout: .seconds(30))
        #expect(!agent.errors.contains("key-store-mismatch"), "\(agent.errors)")
        let client = try ProtectedStoreBinary.run(
            ["shell", "--state-dir", state.path],
            input: "device unlock --passcode 1\napp launch\nexpect store ready\nexpect value k v\napp terminate\n")
        #expect(client.status == 0 && !client.output.contains("FAILED"), "\(client.output) \(client.error)")
    }

    @Test("a default `device serve` with no TPM says on standard error, in one line, that a new device's key goes in a file and why; the device gets uid.key")
    func agentWithoutATPMSaysItFallsBack() throws {
        let state = TemporaryDirectory()
        let tcti = "device:/nonexistent/tpmrm0"
        let agent = try LiveProcess(["device", "serve", "--fast-kdf", "--state-dir", state.path, "--tpm-tcti", tcti])
        defer { agent.kill() }
        try agent.waitFor("serves")
        let notes = agent.errors.split(separator: "\n").filter { $0.contains("no TPM") }
        #expect(notes.count == 1, "\(agent.errors)")
        let note = String(notes.first ?? "")
        #expect(note.hasPrefix("note: no TPM at \(tcti) ("), "\(note)")
        #expect(note.contains("keeps its key in a file, \(state.path)/hardware/uid.key"), "\(note)")
        #expect(!agent.errors.contains("ERROR:tcti"), "tpm2-tss's own log reached the user: \(agent.errors)")
        let client = try ProtectedStoreBinary.run(["shell", "--state-dir", state.path], input: "device setup --passcode 1\n")
        #expect(client.status == 0, "\(client.output) \(client.error)")
        #expect(FileManager.default.fileExists(atPath: state.file("hardware/uid.key")))
        #expect(!FileManager.default.fileExists(atPath: state.file("hardware/uid.tpm")))
        // An existing device is no fallback: its files decide, and nothing is said.
        agent.kill()
        let again = try LiveProcess(["device", "serve", "--fast-kdf", "--state-dir", state.path, "--tpm-tcti", tcti])
        defer { again.kill() }
        try again.waitFor("serves")
        #expect(!again.errors.contains("no TPM"), "\(again.errors)")
    }

    @Test(
        "keys/README.md's tpm2_createprimary command makes the primary key whose name uid.tpm records (the code's template, with noDA)",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tpm2_createprimary"), "tpm2-tools is not installed"))
    func documentedPrimaryIsTheCodesPrimary() throws {
        let tpm = try SoftwareTPM()
        let state = TemporaryDirectory()
        let setUp = try ProtectedStoreBinary.run(
            ["shell", "--fast-kdf", "--state-dir", state.path, "--key-store", "tpm", "--tpm-tcti", tpm.tcti],
            input: "device setup --passcode 1\n")
        #expect(setUp.status == 0, "\(setUp.output) \(setUp.error)")
        // The primary key's name in uid.tpm: its length at offset 6 (little-endian), the name from offset 16.
        let sealed = [UInt8](try Data(contentsOf: URL(fileURLWithPath: state.file("hardware/uid.tpm"))))
        let nameLength = Int(sealed[6]) | Int(sealed[7]) << 8
        let recorded = Array(sealed[16..<16 + nameLength])

        // The first tpm2_createprimary command keys/README.md gives, run as it is written (saving the key's
        // context in primary.ctx), then the name of that key. The command goes on over the lines that end in a
        // backslash, as the shell reads it.
        let readme = try String(contentsOfFile: SQLCipher4Oracle.packageRoot + "/keys/README.md", encoding: .utf8)
        let start = try #require(readme.range(of: "tpm2_createprimary"))
        var lines: [Substring] = []
        for line in readme[start.lowerBound...].split(separator: "\n") {
            lines.append(line)
            if !line.hasSuffix("\\") { break }
        }
        var command = String(lines.joined(separator: "\n").prefix { $0 != "`" })
        if !command.contains(" -c ") { command += " -c primary.ctx" }
        let work = TemporaryDirectory()
        let script = command + " >/dev/null && tpm2_readpublic -c primary.ctx -n name.bin >/dev/null && tpm2_flushcontext -t"
        let tools = Process()
        tools.executableURL = URL(fileURLWithPath: "/bin/sh")
        tools.arguments = ["-c", script]
        tools.currentDirectoryURL = URL(fileURLWithPath: work.path)
        tools.environment = ProcessInfo.processInfo.environment.merging(["TPM2TOOLS_TCTI": tpm.tcti]) { $1 }
        let errors = Pipe()
        tools.standardError = errors
        try tools.run()
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        tools.waitUntilExit()
        #expect(tools.terminationStatus == 0, "\(command): \(said)")
        let documented = [UInt8](try Data(contentsOf: URL(fileURLWithPath: work.file("name.bin"))))
        #expect(documented == recorded, "\(command) made the primary named \(Self.hex(documented)); uid.tpm records \(Self.hex(recorded))")
    }

    /// Bytes as hexadecimal digits.
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
}
