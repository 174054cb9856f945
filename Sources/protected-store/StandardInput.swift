#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard input, line by line, read with `read(2)` through a buffer of its own.
///
/// Not the C library's `stdin` (which Swift's `readLine()` reads): once `stdin` has seen an end of input its
/// end-of-file flag stays set (glibc 2.28 and later), so after Ctrl-D at a passcode prompt every later read would
/// fail and the shell would end. `read(2)` on a terminal returns 0 once for Ctrl-D and then waits again; on a
/// pipe or a file, 0 stays the end.
@MainActor
final class StandardInput {
    private var buffer: [UInt8] = []
    private var chunk = [UInt8](repeating: 0, count: 64 * 1024)

    /// Whether standard input is a terminal (someone typing), rather than a pipe or a file.
    let isTerminal = isatty(STDIN_FILENO) == 1

    /// The next line, without its line ending (`\n` or `\r\n`).
    ///
    /// - Returns: `nil` at the end of input (Ctrl-D at a terminal), or when reading fails. Text after the last
    ///   line ending is returned as a last line.
    func readLine() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                var line = buffer[..<newline]
                if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
                let text = String(decoding: line, as: UTF8.self)
                buffer.removeSubrange(...newline)
                return text
            }
            let count = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count <= 0 {
                guard !buffer.isEmpty else { return nil }
                defer { buffer.removeAll() }
                return String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(contentsOf: chunk[..<count])
        }
    }
}
