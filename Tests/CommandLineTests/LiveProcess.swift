import Foundation
import Testing

/// The built `protected-store` running as a child process that the test keeps talking to: lines go to its
/// standard input one at a time, its output is collected as it comes, and the test waits for what it expects.
/// For a process that must stay up while others run (an app beside an extension, a device agent).
final class LiveProcess: @unchecked Sendable {
    // @unchecked Sendable: `output` and `error` are written by the reader threads and read by the test, both
    // under `lock`.
    private let process = Process()
    private let input = Pipe()
    private let lock = NSCondition()
    private var output = ""
    private var error = ""
    private var ended = false

    /// A failure to see the expected text in time.
    struct Timeout: Error, CustomStringConvertible {
        let waitingFor: String
        let output: String
        let error: String
        var description: String { "no \"\(waitingFor)\" in time; output: \(output.suffix(2000)) error: \(error.suffix(1000))" }
    }

    /// Starts the binary with `arguments`.
    init(_ arguments: [String]) throws {
        process.executableURL = ProtectedStoreBinary.url
        process.arguments = arguments
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = input
        signal(SIGPIPE, SIG_IGN)
        try process.run()
        read(stdout.fileHandleForReading) { $0.output += $1 }
        read(stderr.fileHandleForReading) { $0.error += $1 }
    }

    /// A non-interactive `shell` on `state`: it exits at the first `expect` that does not hold, which ends any wait.
    static func shell(state: String) throws -> LiveProcess {
        try LiveProcess(["shell", "--fast-kdf", "--state-dir", state])
    }

    /// `device serve` on `state`, once it says it serves.
    static func agent(state: String, fastKDF: Bool = true) throws -> LiveProcess {
        let agent = try LiveProcess(["device", "serve", "--state-dir", state] + (fastKDF ? ["--fast-kdf"] : []))
        try agent.waitFor("serves")
        return agent
    }

    private func read(_ handle: FileHandle, into append: @escaping @Sendable (LiveProcess, String) -> Void) {
        Thread { [self] in
            while true {
                let data = handle.availableData
                lock.lock()
                if data.isEmpty {
                    ended = true
                } else {
                    append(self, String(decoding: data, as: UTF8.self))
                }
                lock.broadcast()
                lock.unlock()
                if data.isEmpty { return }
            }
        }.start()
    }

    /// The process id.
    var processID: Int32 { process.processIdentifier }
    /// Everything it printed so far.
    var printed: String { lock.withLock { output } }
    /// Everything it wrote to standard error so far.
    var errors: String { lock.withLock { error } }

    /// Sends one line.
    func send(_ line: String) {
        try? input.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8))
    }

    /// Waits until its output (standard output or error) contains `text` `count` times.
    func waitFor(_ text: String, count: Int = 1, timeout: Duration = .seconds(60)) throws {
        let deadline = Date(timeIntervalSinceNow: TimeInterval(timeout.components.seconds))
        lock.lock()
        defer { lock.unlock() }
        while (output + error).components(separatedBy: text).count - 1 < count {
            if !lock.wait(until: deadline) || (ended && (output + error).components(separatedBy: text).count - 1 < count && !process.isRunning) {
                throw Timeout(waitingFor: text, output: output, error: error)
            }
        }
    }

    /// Sends `lines` to a shell, then `status`, and waits until that status is printed: every line has run.
    ///
    /// - Returns: what the lines printed, on standard output and on standard error.
    @discardableResult
    func commands(_ lines: [String], timeout: Duration = .seconds(60)) throws -> (output: String, errors: String) {
        let marker = "time            "
        let (outputBefore, errorsBefore) = lock.withLock { (output.utf8.count, error.utf8.count) }
        let seen = printed.components(separatedBy: marker).count - 1
        for line in lines + ["status"] { send(line) }
        try waitFor(marker, count: seen + 1, timeout: timeout)
        return lock.withLock {
            (String(decoding: output.utf8.dropFirst(outputBefore), as: UTF8.self),
             String(decoding: error.utf8.dropFirst(errorsBefore), as: UTF8.self))
        }
    }

    /// Closes standard input and waits for the exit status, at most `timeout`: a process still running then is
    /// killed and the test fails (a hang never blocks the test run).
    func finish(timeout: Duration = .seconds(60), sourceLocation: SourceLocation = #_sourceLocation) -> Int32 {
        try? input.fileHandleForWriting.close()
        let deadline = ContinuousClock.now + timeout
        while process.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
        guard !process.isRunning else {
            kill()
            Issue.record("the process did not exit within \(timeout)", sourceLocation: sourceLocation)
            return -1
        }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Ends it with SIGKILL, as the kernel ends a process: nothing is cleaned up.
    func kill() {
        _ = Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        if process.isRunning { kill() }
    }
}
