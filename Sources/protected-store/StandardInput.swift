import SecureKeys
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
    /// What was read and not yet returned; room for a whole chunk reserved, so that it never grows into new
    /// storage and leaves the old one, with the lines it held, unzeroed.
    private var buffer: [UInt8] = {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(2 * 64 * 1024)
        return buffer
    }()
    /// Where `read(2)` puts its bytes: zeroed once they are copied into ``buffer``.
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
                let end = newline > 0 && buffer[newline - 1] == UInt8(ascii: "\r") ? newline - 1 : newline
                // Through a pointer, not a slice: a slice alive during `consume` would share the storage, and the
                // removal would copy the whole buffer — every line after this one — into storage never zeroed.
                let text = buffer.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[..<end]), as: UTF8.self) }
                consume(newline + 1)
                return text
            }
            let count = chunk.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            if count <= 0 {
                guard !buffer.isEmpty else { return nil }
                defer { consume(buffer.count) }
                return String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(contentsOf: chunk[..<count])
            chunk.withUnsafeMutableBytes { secureZero(UnsafeMutableRawBufferPointer(rebasing: $0[..<count])) }
        }
    }

    /// Drops the first `count` bytes of the buffer, leaving no copy of them (a line may hold a passcode): the rest
    /// moves down over them and the bytes it leaves at the end are zeroed.
    private func consume(_ count: Int) {
        buffer.withUnsafeMutableBytes { bytes in
            let rest = bytes.count - count
            if rest > 0 { bytes.baseAddress!.copyMemory(from: bytes.baseAddress! + count, byteCount: rest) }
            secureZero(UnsafeMutableRawBufferPointer(rebasing: bytes[rest...]))
        }
        buffer.removeLast(count)
    }
}
