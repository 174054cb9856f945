/// An inbox file read ahead in chunks, as a source for a merge.
///
/// The scan and the merge read the file front to back, a few dozen bytes at a time for small records, so one
/// `pread` of a chunk serves hundreds of them instead of two or three system calls per record. A read larger than
/// a chunk goes straight to the file and is not kept, so what this holds is one chunk whatever the file's size.
///
/// Not thread-safe: one merge reads it, on one thread.
package final class InboxReadAhead: InboxByteSource {
    /// The file.
    package let file: InboxBytesInFile
    /// How many bytes one read ahead fetches.
    let chunkLength: Int
    private var chunk: [UInt8] = []
    private var chunkStart = 0

    /// Reads `file` ahead, `chunkLength` bytes at a time.
    package init(_ file: InboxBytesInFile, chunkLength: Int = 1 << 20) {
        self.file = file
        self.chunkLength = chunkLength
    }

    package var count: Int { file.count }

    package func read(_ range: Range<Int>) throws -> [UInt8] {
        if range.lowerBound >= chunkStart, range.upperBound <= chunkStart + chunk.count {
            return Array(chunk[range.lowerBound - chunkStart..<range.upperBound - chunkStart])
        }
        guard range.count <= chunkLength / 2 else { return try file.read(range) }
        chunkStart = range.lowerBound
        chunk = []
        chunk = try file.read(chunkStart..<min(chunkStart + chunkLength, file.count))
        guard chunk.count >= range.count else { return try file.read(range) }
        return Array(chunk[0..<range.count])
    }

    /// Drops the chunk read ahead.
    package func release() {
        chunk = []
        chunkStart = 0
    }
}
