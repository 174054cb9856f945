import Glibc
import SystemPackage

/// A search of a folder's regular files for plaintext.
///
/// It looks for values that must never reach a file in the clear, and for SQLite's plaintext header.
///
/// It keeps what it read from scan to scan: the buffer files are read into, and each file's signature, so
/// that a scan after every simulated step reads only the files that changed.
struct PlaintextScanner {
    /// Size and modification time of each file at its last scan.
    private var scannedFiles: [String: [Int]] = [:]
    /// What files are read into.
    ///
    /// It is kept from scan to scan, as the simulator scans after every step.
    private var scanBuffer: [UInt8] = []

    /// The first of `patterns` found in each file under `folder` but those `skip` names, as
    /// `plaintext 'PATTERN' in NAME` lines.
    ///
    /// - Parameters:
    ///   - patterns: the byte strings to look for, in the order they are tried.
    ///   - folder: the folder whose files are read.
    ///   - onlyChanged: skip files whose size and modification time are what they were at the previous scan.
    ///   - skip: whether a file, by its name relative to `folder`, is passed over.
    mutating func findings(
        of patterns: [[UInt8]], under folder: String, onlyChanged: Bool, skip: (String) -> Bool
    ) -> [String] {
        var findings: [String] = []
        for file in RegularFile.all(under: folder) where !skip(file.name) {
            let name = file.name
            if onlyChanged && scannedFiles[name] == file.signature { continue }
            scannedFiles[name] = file.signature
            let found = withContents(of: folder + "/" + name) { haystack in
                patterns.first { pattern in
                    Self.contains(haystack, pattern)
                }
            } ?? nil
            if let found { findings.append("plaintext '\(String(decoding: found, as: UTF8.self))' in \(name)") }
        }
        return findings
    }

    /// Calls `body` with the contents of the file at `path`, read into ``scanBuffer``.
    ///
    /// Returns `nil` if it cannot be read.
    private mutating func withContents<Result>(of path: String, _ body: (UnsafeRawBufferPointer) -> Result) -> Result? {
        guard let file = try? FileDescriptor.open(FilePath(path), .readOnly, options: .closeOnExec) else { return nil }
        let length: Int
        do {
            length = try file.closeAfter { try readAll(of: file) }
        } catch {
            return nil
        }
        return scanBuffer.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0.prefix(length))) }
    }

    /// Reads `file` to its end into ``scanBuffer``, growing it as needed, and returns how many bytes it read.
    private mutating func readAll(of file: FileDescriptor) throws -> Int {
        var length = 0
        while true {
            if length == scanBuffer.count { scanBuffer.append(contentsOf: [UInt8](repeating: 0, count: max(1 << 16, scanBuffer.count))) }
            // `read` retries when a signal interrupts it.
            let count = try scanBuffer.withUnsafeMutableBytes { buffer in
                try file.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[length...]))
            }
            if count == 0 { return length }
            length += count
        }
    }

    /// Whether `needle` occurs in `haystack`.
    ///
    /// It uses `memchr` to the next candidate first byte, then `memcmp` to confirm.
    static func contains(_ haystack: UnsafeRawBufferPointer, _ needle: [UInt8]) -> Bool {
        guard let first = needle.first, needle.count <= haystack.count, let base = haystack.baseAddress else { return false }
        let last = haystack.count - needle.count
        var offset = 0
        while offset <= last {
            guard let hit = memchr(base + offset, Int32(first), last - offset + 1) else { return false }
            let index = base.distance(to: UnsafeRawPointer(hit))
            if memcmp(base + index, needle, needle.count) == 0 { return true }
            offset = index + 1
        }
        return false
    }
}
