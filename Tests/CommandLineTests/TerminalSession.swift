import Foundation
import Glibc

/// Runs the built binary on a pseudo-terminal (`posix_openpt`), as someone typing at it would: standard
/// input, output and error are the terminal, so `isatty` holds and echo can be turned off.
///
/// Lines are sent only once the prompt that asks for them has appeared: the shell turns echo off with
/// `TCSAFLUSH`, which would discard anything typed ahead, and typed-ahead text would be echoed back.
final class TerminalSession {
    let process = Process()
    private let primary: Int32
    /// Everything the program wrote to the terminal so far (and what the terminal echoed of the input).
    private var output: [UInt8] = []
    /// Where the next ``waitFor(_:timeout:)`` starts looking, in bytes of ``output``.
    private var searchedUpTo = 0

    /// ``output`` as text.
    var transcript: String { String(decoding: output, as: UTF8.self) }

    struct Timeout: Error, CustomStringConvertible {
        let waitingFor: String
        let transcript: String
        var description: String { "waited in vain for \"\(waitingFor)\"; the terminal shows:\n\(transcript)" }
    }

    /// - Parameters:
    ///   - arguments: the binary's arguments.
    ///   - environment: variables added to this process's.
    ///   - controllingTerminal: whether the terminal is the program's controlling terminal (`setsid --ctty
    ///     --wait`, util-linux), as a terminal window's is: Ctrl-C typed then sends SIGINT to it, as the kernel's
    ///     line discipline does. The exit status is then the one `setsid --wait` passes on.
    init(_ arguments: [String], environment: [String: String] = [:], controllingTerminal: Bool = false) throws {
        primary = PseudoTerminal.openpt(O_RDWR | O_NOCTTY)
        guard primary >= 0, PseudoTerminal.grantpt(primary) == 0, PseudoTerminal.unlockpt(primary) == 0,
            let name = PseudoTerminal.ptsname(primary)
        else {
            throw POSIXError(.ENOTTY)
        }
        let secondary = open(name, O_RDWR | O_NOCTTY)
        guard secondary >= 0 else { throw POSIXError(.ENOTTY) }
        let terminal = FileHandle(fileDescriptor: secondary, closeOnDealloc: false)
        if controllingTerminal {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setsid")
            process.arguments = ["--ctty", "--wait", ProtectedStoreBinary.url.path] + arguments
        } else {
            process.executableURL = ProtectedStoreBinary.url
            process.arguments = arguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardInput = terminal
        process.standardOutput = terminal
        process.standardError = terminal
        try process.run()
        close(secondary)  // the child holds its copies; reads on the primary end with EIO once it exits
    }

    deinit {
        if process.isRunning { process.terminate() }
        close(primary)
    }

    /// Reads until the output since the last match contains `text`.
    ///
    /// - Throws: ``Timeout`` if it does not appear in time, or the program ends first.
    func waitFor(_ text: String, timeout: Duration = .seconds(60)) throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let unsearched = String(decoding: output[searchedUpTo...], as: UTF8.self)
            if let found = unsearched.range(of: text) {
                searchedUpTo += unsearched[..<found.upperBound].utf8.count
                return
            }
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero, readSome(waitingAtMost: remaining) else {
                throw Timeout(waitingFor: text, transcript: transcript)
            }
        }
    }

    /// Whether the terminal echoes what is typed now (its `ECHO` local mode).
    var echoes: Bool {
        var modes = termios()
        tcgetattr(primary, &modes)
        return modes.c_lflag & tcflag_t(ECHO) != 0
    }

    /// One turn of a conversation: what is typed, then what must appear, in order, before the next turn.
    struct Turn {
        let keys: [UInt8]
        let answers: [String]

        /// Types `line` and Return, then waits for each of `answers`.
        static func type(_ line: String, until answers: String...) -> Turn {
            Turn(keys: Array((line + "\n").utf8), answers: answers)
        }

        /// Types `keys` as they are (an arrow key's escape sequence, Ctrl-C), then waits for each of `answers`.
        static func press(_ keys: String, until answers: String...) -> Turn {
            Turn(keys: Array(keys.utf8), answers: answers)
        }

        /// Types Ctrl-D (end of file at the start of a line), then waits for each of `answers`.
        static func endOfFile(until answers: String...) -> Turn {
            Turn(keys: [4], answers: answers)
        }
    }

    /// Plays `turns` in order.
    ///
    /// - Parameter timeout: how long each answer may take to appear.
    /// - Throws: ``Timeout`` for an answer that does not appear.
    func converse(_ turns: [Turn], timeout: Duration = .seconds(60)) throws {
        for turn in turns {
            write(turn.keys)
            for answer in turn.answers { try waitFor(answer, timeout: timeout) }
        }
    }

    /// Types `line` and Return.
    func send(_ line: String) {
        write(Array((line + "\n").utf8))
    }

    private func write(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.write(primary, $0.baseAddress, $0.count) }
    }

    /// Reads the rest of the output and waits for the program to end.
    ///
    /// - Returns: its exit status.
    func finish(timeout: Duration = .seconds(60)) throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, readSome(waitingAtMost: ContinuousClock.now.duration(to: deadline)) {}
        guard ContinuousClock.now < deadline else { throw Timeout(waitingFor: "the end", transcript: transcript) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// - Returns: `false` at the end of the output (the program closed the terminal) or when nothing came in time.
    private func readSome(waitingAtMost limit: Duration) -> Bool {
        var descriptor = pollfd(fd: primary, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(clamping: limit.components.seconds * 1000 + limit.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&descriptor, 1, max(milliseconds, 1)) > 0 else { return false }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { read(primary, $0.baseAddress, $0.count) }
        guard count > 0 else { return false }
        output += buffer[..<count]
        return true
    }
}

/// The C library's pseudo-terminal functions, looked up at run time: Glibc's Swift module leaves them out
/// (`stdlib.h` declares them only under `_XOPEN_SOURCE`).
enum PseudoTerminal {
    private typealias Opener = @convention(c) (Int32) -> Int32
    private typealias Namer = @convention(c) (Int32) -> UnsafeMutablePointer<CChar>?

    private static func function<F>(_ name: String, as type: F.Type) -> F {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else {
            fatalError("the C library has no \(name)")
        }
        return unsafeBitCast(symbol, to: type)
    }

    static func openpt(_ flags: Int32) -> Int32 { function("posix_openpt", as: Opener.self)(flags) }
    static func grantpt(_ descriptor: Int32) -> Int32 { function("grantpt", as: Opener.self)(descriptor) }
    static func unlockpt(_ descriptor: Int32) -> Int32 { function("unlockpt", as: Opener.self)(descriptor) }
    static func ptsname(_ descriptor: Int32) -> String? {
        function("ptsname", as: Namer.self)(descriptor).map { String(cString: $0) }
    }
}
