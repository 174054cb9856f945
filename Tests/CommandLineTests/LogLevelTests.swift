import Foundation
import Testing

@Suite("--log-level", .timeLimit(.minutes(3)))
struct LogLevelTests {
    static let script = ProtectedStoreBinary.scenariosFolder.appendingPathComponent("locked-background-launch.scenario").path

    @Test("without --log-level the library logs nothing: standard error stays empty and the output is unchanged")
    func silentByDefault() throws {
        let result = try ProtectedStoreBinary.run(["run", "--fast-kdf", Self.script])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.error.isEmpty, "\(result.error.prefix(500))")
        #expect(!result.output.contains("protected-store.launch"))
    }

    @Test("--log-level debug writes the launch's flow to standard error, by subsystem, and never the passcode")
    func debugLogsTheFlow() throws {
        let quiet = try ProtectedStoreBinary.run(["run", "--fast-kdf", Self.script])
        let result = try ProtectedStoreBinary.run(["run", "--fast-kdf", "--log-level", "debug", Self.script])
        #expect(result.status == 0, "\(result.error)")
        for label in ["protected-store.launch", "protected-store.device", "protected-store.store"] {
            #expect(result.error.contains(label), "no \(label) line in: \(result.error.prefix(800))")
        }
        #expect(result.error.contains("phase changed"))
        #expect(result.error.contains("to=waiting") && result.error.contains("to=ready"))
        #expect(!result.error.contains("1234"), "the scenario's passcode appears in the log")
        #expect(!result.error.contains("Rue de Rivoli"), "a stored value appears in the log")
        #expect(result.output == quiet.output, "logging changed standard output")
    }

    @Test("an unknown level is a usage error that names the levels")
    func unknownLevelRefused() throws {
        let result = try ProtectedStoreBinary.run(["run", "--log-level", "loud", Self.script])
        #expect(result.status == 64)
        #expect(result.error.contains("trace"), "\(result.error)")
    }
}
