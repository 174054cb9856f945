import SecureKeys
import Glibc
import SystemPackage

/// Standard input, line by line, read with `read(2)` into guarded memory of its own.
///
/// Not the C library's `stdin` (which Swift's `readLine()` reads): once `stdin` has seen an end of input its
/// end-of-file flag stays set (glibc 2.28 and later), so after Ctrl-D at a passcode prompt every later read would
/// fail and the shell would end. `read(2)` on a terminal returns 0 once for Ctrl-D and then waits again; on a
/// pipe or a file, 0 stays the end.
///
/// A line may hold a passcode (`device unlock --passcode P`), so no byte read ever lands in a Swift array or
/// string: `read(2)` writes into ``SecureBytes``, a line is returned in ``SecureBytes`` of its own, and the
/// bytes a returned line leaves behind are zeroed.
@MainActor
final class StandardInput {
    /// What was read and not yet returned, in the first ``filled`` bytes.
    ///
    /// A line longer than it moves to storage twice as large; the old storage is zeroed as it is released.
    private var storage: SecureBytes
    /// How many bytes of ``storage`` hold input.
    private var filled = 0
    /// How many of them are known to hold no line feed.
    private var scanned = 0

    /// Whether standard input is a terminal (someone typing), rather than a pipe or a file.
    let isTerminal = isatty(STDIN_FILENO) == 1

    /// Standard input, with 64 KiB of guarded storage to read into.
    ///
    /// - Throws: `SecureKeysError` with `out-of-memory` when the guarded memory cannot be allocated.
    init() throws {
        storage = try SecureBytes(count: 64 * 1024)
    }

    /// The next line as UTF-8 bytes in guarded memory, without its line ending.
    ///
    /// The line ending is `\n` or `\r\n`. Wipe the line once it is parsed.
    ///
    /// - Returns: `nil` at the end of input (Ctrl-D at a terminal), or when reading fails. Text after the last
    ///   line ending is returned as a last line.
    /// - Throws: `SecureKeysError` with `out-of-memory` when the guarded memory for the line (or for a longer
    ///   line's storage) cannot be allocated.
    func readLine() throws -> SecureBytes? {
        while true {
            if let line = try takeLine() { return line }
            if filled == storage.count { try grow() }
            let (start, room) = (filled, storage.count - filled)
            // The storage is this object's and never wiped while it is: the access cannot fail.
            // swift-system's read goes round again on EINTR; another failure ends the input as its end does.
            let count = (try? storage.withUnsafeMutableBytes {
                try FileDescriptor.standardInput.read(into: UnsafeMutableRawBufferPointer(rebasing: $0[start..<(start + room)]))
            }) ?? -1
            if count <= 0 {
                guard filled > 0 else { return nil }
                return try take(lineLength: filled, consumed: filled)
            }
            filled += count
        }
    }

    /// The first line of what was read, when a line feed ends it.
    private func takeLine() throws -> SecureBytes? {
        let (from, to) = (scanned, filled)
        let newline = try! storage.withUnsafeBytes { bytes in
            bytes[from..<to].firstIndex(of: UInt8(ascii: "\n"))
        }
        guard let newline else {
            scanned = filled
            return nil
        }
        let endsWithReturn = try! storage.withUnsafeBytes { newline > 0 && $0[newline - 1] == UInt8(ascii: "\r") }
        return try take(lineLength: endsWithReturn ? newline - 1 : newline, consumed: newline + 1)
    }

    /// Copies the first `lineLength` bytes into a line of their own and drops the first `consumed` bytes.
    ///
    /// It leaves no copy of them: the rest moves down over them and the bytes it leaves at the end are zeroed.
    private func take(lineLength: Int, consumed: Int) throws -> SecureBytes {
        let filled = self.filled
        // Allocated first: out of memory, the input stays as it was.
        let line = try SecureBytes(count: lineLength)
        try! storage.withUnsafeMutableBytes { bytes in
            try! line.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[..<lineLength])) }
            let rest = filled - consumed
            if rest > 0 { bytes.baseAddress!.copyMemory(from: bytes.baseAddress! + consumed, byteCount: rest) }
            secureZero(UnsafeMutableRawBufferPointer(rebasing: bytes[rest..<filled]))
        }
        self.filled -= consumed
        scanned = 0
        return line
    }

    /// Moves what was read to guarded storage twice as large.
    ///
    /// The old storage is zeroed and freed.
    private func grow() throws {
        let larger = try SecureBytes(count: storage.count * 2)
        let filled = self.filled
        try! storage.withUnsafeBytes { old in
            try! larger.withUnsafeMutableBytes { new in
                new.baseAddress!.copyMemory(from: old.baseAddress!, byteCount: filled)
            }
        }
        storage.wipe()
        storage = larger
    }
}
