import Foundation

/// Searches this process's own memory, for tests that a secret is gone from it.
public enum ProcessMemory: Sendable {
    /// Every address in a readable and writable mapping of this process (heap, stacks, anonymous maps,
    /// libraries' data: wherever a copy of a secret could be left; mappings of 4 GiB or more, which only a
    /// sanitizer's shadow memory is, are skipped) where `needle` occurs, apart from the
    /// ranges in `excluding` (the test's own reference copy). Read through `/proc/self/mem`, so guard pages
    /// and unmapped gaps are skipped instead of faulting.
    ///
    /// With `processID`, searches that process instead (a child the test started; reading its memory needs the
    /// right to trace it, which root has: `protected-store` makes itself non-dumpable, so only a process with
    /// `CAP_SYS_PTRACE` may read it).
    ///
    /// With `onlyDumped`, mappings a core file leaves out (`MADV_DONTDUMP`, the `dd` of their `VmFlags` in
    /// `smaps`: libsodium's guarded allocations, where `SecureBytes` keeps a key it holds on purpose) are
    /// skipped: what is searched is what a core dump of the process would contain.
    public static func occurrences(
        of needle: UnsafeRawBufferPointer, excluding: [Range<UInt>] = [], inProcess processID: Int32? = nil,
        onlyDumped: Bool = false
    ) throws -> [UInt] {
        precondition(needle.count > 0)
        let process = processID.map(String.init) ?? "self"
        let maps = try readToEnd("/proc/\(process)/maps")
        let undumped = onlyDumped ? try notDumpedMappings(of: process) : []
        let memory = open("/proc/\(process)/mem", O_RDONLY)
        guard memory >= 0 else { throw CocoaError(.fileReadNoPermission) }
        defer { close(memory) }
        let chunkSize = 1 << 20
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize + needle.count, alignment: 16)
        defer { chunk.deallocate() }
        let chunkRange = UInt(bitPattern: chunk.baseAddress)..<UInt(bitPattern: chunk.baseAddress) + UInt(chunk.count)
        let skip = excluding + (processID == nil ? [chunkRange] : [])
        var found: [UInt] = []
        for line in maps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 2, fields[1].hasPrefix("rw") else { continue }
            let bounds = fields[0].split(separator: "-").compactMap { UInt($0, radix: 16) }
            // A sanitizer's shadow memory is a single mapping of terabytes, almost all of it never touched; no
            // heap, stack or library mapping of a test comes near 4 GiB.
            guard bounds.count == 2, bounds[1] - bounds[0] < 1 << 32 else { continue }
            if undumped.contains(bounds[0]) { continue }
            // Overlap chunks by needle.count - 1 so a match across a boundary is found.
            var start = bounds[0]
            while start < bounds[1] {
                let length = Int(min(UInt(chunkSize + needle.count - 1), bounds[1] - start))
                let read = pread(memory, chunk.baseAddress, length, off_t(Int64(bitPattern: UInt64(start))))
                if read < needle.count { break }
                for offset in matches(of: needle, in: UnsafeRawBufferPointer(rebasing: chunk[0..<read])) {
                    let address = start + UInt(offset)
                    if !skip.contains(where: { $0.contains(address) }) { found.append(address) }
                }
                start += UInt(chunkSize)
            }
        }
        return found
    }

    /// The start addresses of the mappings of `process` that a core file leaves out (`dd` in `VmFlags`).
    static func notDumpedMappings(of process: String) throws -> Set<UInt> {
        var starts: Set<UInt> = []
        var current: UInt?
        for line in try readToEnd("/proc/\(process)/smaps").split(separator: "\n") {
            if line.hasPrefix("VmFlags:") {
                if let current, line.split(separator: " ").dropFirst().contains("dd") { starts.insert(current) }
                continue
            }
            // A mapping's header: `start-end perms offset dev inode [path]`; the fields below it have a colon.
            guard let first = line.split(separator: " ").first, first.contains("-"), !first.hasSuffix(":") else { continue }
            current = first.split(separator: "-").first.flatMap { UInt($0, radix: 16) }
        }
        return starts
    }

    /// The whole of a /proc file: they report a size of 0, so they are read until `read` returns nothing.
    static func readToEnd(_ path: String) throws -> String {
        let descriptor = open(path, O_RDONLY)
        guard descriptor >= 0 else { throw CocoaError(.fileReadNoPermission) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func matches(of needle: UnsafeRawBufferPointer, in haystack: UnsafeRawBufferPointer) -> [Int] {
        var result: [Int] = []
        guard haystack.count >= needle.count, let base = haystack.baseAddress, let first = needle.first else { return [] }
        var offset = 0
        while offset <= haystack.count - needle.count {
            guard let hit = memchr(base + offset, Int32(first), haystack.count - needle.count - offset + 1) else { break }
            let position = base.distance(to: UnsafeRawPointer(hit))
            if memcmp(base + position, needle.baseAddress!, needle.count) == 0 { result.append(position) }
            offset = position + 1
        }
        return result
    }
}
