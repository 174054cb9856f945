import Foundation

/// SQLCipher 4, a second implementation that reads stores the library wrote: PyPI's `sqlcipher3-binary` (a
/// Python binding with SQLCipher 4 built in) in a virtual environment under the build folder, made once per
/// build folder and reused, driven by `Tests/Oracle/sqlcipher4_oracle.py`.
///
/// Where pip cannot install it (no network), ``availability`` says why, and the tests that need it are
/// skipped with that line — never passed without it.
public enum SQLCipher4Oracle: Sendable {
    /// The package's root folder.
    public static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    /// The virtual environment: `<build folder>/sqlcipher4-venv`, the build folder being the `.build…`
    /// folder holding the running test binary (`.build`, `.build-tsan`, `.build-asan`).
    public static let environment: String = {
        if let override = ProcessInfo.processInfo.environment["PROTECTEDSTORE_SQLCIPHER4_VENV"] { return override }
        var folder = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "")
        while folder.path != "/" && !folder.path.isEmpty {
            if folder.lastPathComponent.hasPrefix(".build") { return folder.appendingPathComponent("sqlcipher4-venv").path }
            folder.deleteLastPathComponent()
        }
        return packageRoot + "/.build/sqlcipher4-venv"
    }()

    /// The environment's Python.
    public static var python: String { environment + "/bin/python3" }

    /// `nil` when the oracle is ready; otherwise why not (printed once, and the reason tests are skipped).
    /// Made the first time it is asked for in a process: an environment left whole by an earlier run is
    /// reused; one is made in a temporary folder beside it and renamed into place when complete, so a run
    /// killed half-way leaves none that looks ready.
    public static let unavailableReason: String? = {
        let reason = prepare()
        if let reason {
            FileHandle.standardError.write(Data("SQLCipher 4 oracle unavailable, its tests are skipped: \(reason)\n".utf8))
        }
        return reason
    }()

    /// Whether the oracle is ready.
    public static var isAvailable: Bool { unavailableReason == nil }

    private static func prepare() -> String? {
        if run(python, ["-c", "import sqlcipher3"]).status == 0 { return nil }
        let system = "/usr/bin/python3"
        guard FileManager.default.isExecutableFile(atPath: system) else { return "\(system) is not installed" }
        let building = environment + ".making-\(getpid())"
        try? FileManager.default.removeItem(atPath: building)
        defer { try? FileManager.default.removeItem(atPath: building) }
        let venv = run(system, ["-m", "venv", building])
        guard venv.status == 0 else { return "\(system) -m venv failed: \(venv.output)" }
        let pip = run(building + "/bin/python3", ["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "sqlcipher3-binary"])
        guard pip.status == 0 else {
            return "pip could not install sqlcipher3-binary (no network?): \(pip.output.suffix(400))"
        }
        try? FileManager.default.removeItem(atPath: environment)
        do {
            try FileManager.default.moveItem(atPath: building, toPath: environment)
        } catch {
            return "could not move the environment into place at \(environment): \(error)"
        }
        let check = run(python, ["-c", "import sqlcipher3"])
        return check.status == 0 ? nil : "sqlcipher3 does not import after the install: \(check.output)"
    }

    /// What the oracle read from one database.
    public struct Reading: Decodable, Sendable {
        /// Every table's rows, each cell as `null`, `integer:N`, `real:X`, `text:S` or `blob:HEX`.
        public var tables: [String: [[Cell]]]
        /// `PRAGMA cipher_integrity_check`'s findings: empty for a sound database.
        public var integrity: [String]
    }

    /// One value, as SQLCipher 4 read it.
    public struct Cell: Decodable, Hashable, Sendable, CustomStringConvertible {
        public var null: Bool?
        public var integer: Int64?
        public var real: Double?
        public var text: String?
        public var blob: String?

        public init(null: Bool? = nil, integer: Int64? = nil, real: Double? = nil, text: String? = nil, blob: String? = nil) {
            self.null = null
            self.integer = integer
            self.real = real
            self.text = text
            self.blob = blob
        }

        public var description: String {
            if let integer { return "integer:\(integer)" }
            if let real { return "real:\(real)" }
            if let text { return "text:\(text)" }
            if let blob { return "blob:\(blob)" }
            return "null"
        }
    }

    /// What the oracle answered.
    public struct Answer: Decodable, Sendable {
        /// `PRAGMA cipher_version` of the oracle's SQLCipher (`4.12.0 community`).
        public var cipherVersion: String
        /// Each database's reading, by path.
        public var databases: [String: Reading]

        enum CodingKeys: String, CodingKey {
            case cipherVersion = "cipher_version"
            case databases
        }
    }

    /// A failure of the oracle: what it said.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Opens each of `databases` with SQLCipher 4, keyed with `keyHex` (the raw key) and set up with
    /// `pragmas` only; reads every table and runs `cipher_integrity_check`.
    ///
    /// - Throws: ``Failure`` with SQLCipher 4's own words when a database does not open or read.
    public static func read(databases: [String], keyHex: String, pragmas: [String]) throws -> Answer {
        let request = try JSONSerialization.data(withJSONObject: ["key": keyHex, "pragmas": pragmas, "databases": databases])
        let result = run(python, [packageRoot + "/Tests/Oracle/sqlcipher4_oracle.py"], input: request)
        guard result.status == 0 else { throw Failure(description: result.errors.isEmpty ? result.output : result.errors) }
        return try JSONDecoder().decode(Answer.self, from: Data(result.output.utf8))
    }

    private static func run(_ executable: String, _ arguments: [String], input: Data? = nil)
        -> (status: Int32, output: String, errors: String)
    {
        guard FileManager.default.isExecutableFile(atPath: executable) else { return (127, "\(executable) not found", "") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        let errors = Pipe()
        let stdin = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = stdin
        do { try process.run() } catch { return (127, "\(error)", "") }
        if let input { stdin.fileHandleForWriting.write(input) }
        try? stdin.fileHandleForWriting.close()
        // Both pipes drained before waiting, so a large answer cannot block the child.
        let errorData = LockedData()
        let errorReader = Thread { errorData.set(errors.fileHandleForReading.readDataToEndOfFile()) }
        errorReader.start()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        while !errorData.isSet { usleep(1000) }
        let errorText = String(decoding: errorData.value, as: UTF8.self)
        let outputText = String(decoding: outputData, as: UTF8.self)
        return (process.terminationStatus, process.terminationStatus == 0 ? outputText : outputText + errorText, errorText)
    }

    private final class LockedData: @unchecked Sendable {  // guarded by `lock`
        private let lock = NSLock()
        private var data: Data?
        func set(_ value: Data) { lock.withLock { data = value } }
        var isSet: Bool { lock.withLock { data != nil } }
        var value: Data { lock.withLock { data ?? Data() } }
    }
}
