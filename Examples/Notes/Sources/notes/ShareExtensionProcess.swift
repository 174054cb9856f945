import Foundation

/// The share extension's executable, run as a second process, as the system would start an extension beside
/// the app.
///
/// It is looked for in the folder of the app's own executable — where `swift build` puts every product of
/// this package.
struct ShareExtensionProcess {
    /// The executable's file name.
    static let executableName = "notes-share-extension"

    /// What a run printed and how it ended.
    struct Run: Sendable {
        /// The exit status (0: the record is durable in the inbox).
        var status: Int32
        /// What it printed on standard output.
        var output: String
        /// What it printed on standard error.
        var error: String
    }

    /// The executable, next to the app's.
    let executable: URL

    /// Finds the executable next to the app's.
    ///
    /// - Throws: ``StoryFailure`` when it is not there (the package was not built whole).
    init() throws {
        guard let app = Bundle.main.executableURL else { throw StoryFailure("cannot tell where this executable is") }
        executable = app.deletingLastPathComponent().appendingPathComponent(Self.executableName)
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw StoryFailure(
                "\(Self.executableName) is not next to the app (\(executable.path)): build the whole package first, "
                    + "`swift build --package-path Examples/Notes`")
        }
    }

    /// Runs the extension to its end.
    ///
    /// - Parameter arguments: its command line: container, title, body, tags.
    /// - Returns: its exit status and output.
    /// - Throws: when the process cannot be started.
    func run(_ arguments: [String]) async throws -> Run {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let output = Pipe()
        let error = Pipe()
        process.standardOutput = output
        process.standardError = error
        // Waits on the process's termination handler rather than `waitUntilExit()`, which would hold the main
        // actor. The extension prints a few lines, far less than a pipe holds, so reading after the exit is safe.
        let status: Int32 = try await withCheckedThrowingContinuation { continuation in
            process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
        return Run(
            status: status,
            output: String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self),
            error: String(decoding: error.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }
}
