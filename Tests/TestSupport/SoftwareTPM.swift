import Foundation

/// A software TPM of the test's own (`swtpm socket --tpm2`) on two free local ports, with its state in a
/// folder of its own: what a machine's TPM is to the device. Stopping it and starting another on the same state
/// folder is a power cycle of the machine; another folder is another machine's TPM.
public final class SoftwareTPM: @unchecked Sendable {  // a test's own object; `process` is only touched by its owner
    /// Where `swtpm` is, or `nil`: the tests that need it say so and are skipped.
    public static let executable: String? = ["/usr/bin/swtpm", "/usr/local/bin/swtpm"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// Why the tests that need a software TPM do not run, or `nil` when they do.
    public static var missing: String? {
        executable == nil ? "swtpm is not installed (apt install swtpm swtpm-tools): the TPM tests need a software TPM" : nil
    }

    /// The TPM's state folder.
    public let stateDirectory: String
    /// The command port (the control port is the next one).
    public private(set) var port: UInt16 = 0
    private var process: Process?
    /// Keeps a state folder it made.
    private let ownState: TemporaryDirectory?

    /// `swtpm:host=127.0.0.1,port=N`, for `TPMDeviceKeyStore(tcti:)`.
    public var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    /// Starts a new TPM, with state in `stateDirectory` (a new folder when `nil`).
    public init(stateDirectory: String? = nil) throws {
        if let stateDirectory {
            self.stateDirectory = stateDirectory
            ownState = nil
        } else {
            let folder = TemporaryDirectory()
            ownState = folder
            self.stateDirectory = folder.path
        }
        try start()
    }

    deinit { stop() }

    /// Starts swtpm on two free ports and waits until its command port accepts connections.
    public func start() throws {
        guard let executable = Self.executable else { throw CocoaError(.executableNotLoadable) }
        for _ in 0..<20 {
            let candidate = try Self.freePortPair()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = [
                "socket", "--tpm2", "--server", "type=tcp,port=\(candidate),bindaddr=127.0.0.1",
                "--ctrl", "type=tcp,port=\(candidate + 1),bindaddr=127.0.0.1", "--tpmstate", "dir=\(stateDirectory)",
                "--flags", "not-need-init,startup-clear",
            ]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            for _ in 0..<200 where process.isRunning {
                if Self.accepts(port: candidate) {
                    self.process = process
                    port = candidate
                    return
                }
                usleep(10_000)
            }
            // The port was taken between the probe and swtpm's bind (or swtpm failed): another pair.
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
        }
        throw CocoaError(.executableLoad)
    }

    /// Stops swtpm (SIGTERM, then waits): its state is on disk.
    ///
    /// swtpm leaves SIGTERM to its control channel here (a child of this process, it does not stop on it), so
    /// it is sent `CMD_SHUTDOWN` there, as `swtpm_ioctl -s` does, which saves its state and exits; SIGKILL if it
    /// has not within 5 seconds.
    public func stop() {
        guard let process else { return }
        if process.isRunning { Self.sendShutdown(controlPort: port + 1) }
        for _ in 0..<500 where process.isRunning { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        self.process = nil
    }

    /// swtpm's control command 3, `CMD_SHUTDOWN` (swtpm's `tpm_ioctl.h`), big-endian, and its 4-byte answer.
    private static func sendShutdown(controlPort: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = controlPort.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { return }
        let command: [UInt8] = [0, 0, 0, 3]
        guard write(fd, command, command.count) == command.count else { return }
        var answer = [UInt8](repeating: 0, count: 4)
        _ = read(fd, &answer, answer.count)
    }

    /// The machine reboots: the TPM stops and starts again on the same state (new ports).
    public func powerCycle() throws {
        stop()
        try start()
    }

    /// A port P such that P and P + 1 are free now (bound and released).
    private static func freePortPair() throws -> UInt16 {
        for _ in 0..<100 {
            let port = UInt16.random(in: 20_000...60_000)
            if isFree(port), isFree(port + 1) { return port }
        }
        throw CocoaError(.featureUnsupported)
    }

    private static func isFree(_ port: UInt16) -> Bool { withLoopback(port) { bind($0, $1, $2) == 0 } }

    private static func accepts(port: UInt16) -> Bool { withLoopback(port) { connect($0, $1, $2) == 0 } }

    /// Runs `body` with a new TCP socket and the address 127.0.0.1:`port`; the socket is closed after.
    private static func withLoopback(
        _ port: UInt16, _ body: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Bool
    ) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}
