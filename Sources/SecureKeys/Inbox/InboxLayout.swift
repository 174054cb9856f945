import Glibc
import SystemPackage

/// Where an inbox scan reads its bytes.
///
/// It is an array in memory, or an open file read with `pread`, so a scan never needs more than one record in
/// memory, whatever the file's size.
package protocol InboxByteSource {
    /// How many bytes there are.
    var count: Int { get }
    /// The bytes in `range` (within `0..<count`).
    ///
    /// - Throws: `SecureKeysError.Code.ioError` when they cannot be read.
    func read(_ range: Range<Int>) throws -> [UInt8]
}

/// Bytes in memory, as a source for a scan.
package struct InboxBytesInMemory: InboxByteSource {
    let bytes: [UInt8]
    package init(_ bytes: [UInt8]) { self.bytes = bytes }
    package var count: Int { bytes.count }
    package func read(_ range: Range<Int>) -> [UInt8] { Array(bytes[range]) }
}

/// An open file, read with `pread` (the descriptor stays the caller's), as a source for a scan.
package struct InboxBytesInFile: InboxByteSource {
    let descriptor: Int32
    let path: String
    package let count: Int

    /// The file open at `descriptor`, `count` bytes long (its size under the inbox's lock).
    package init(descriptor: Int32, path: String, count: Int) {
        self.descriptor = descriptor
        self.path = path
        self.count = count
    }

    package func read(_ range: Range<Int>) throws -> [UInt8] {
        try SecureFile.readAll(from: FileDescriptor(rawValue: descriptor), offset: range.lowerBound, count: range.count, path: path)
    }
}

extension InboxRecord {
    /// One span of an inbox file, as a scan finds it.
    ///
    /// Every byte of the file belongs to exactly one piece.
    public enum Piece: Sendable, Hashable {
        /// A record, whose sealed payload is `sealedLength` bytes from `offset + 8`.
        ///
        /// `checksumVerified` is `false` for a record whose checksum fails but whose length ends exactly where
        /// the next intact record starts (or at the end of the file). Its bytes are where its length says, and
        /// only opening its seal (authenticated) tells whether they are intact.
        case record(offset: Int, sealedLength: Int, checksumVerified: Bool)
        /// Bytes that are not a record, never read as data.
        ///
        /// They are garbage, a length no record has, a length that runs across the next intact record, or a
        /// failed checksum whose length does not fit.
        case damaged(offset: Int, length: Int, reason: String)
        /// The file ends inside a record and no intact record follows.
        ///
        /// It is an append that was cut short.
        case tornTail(offset: Int, length: Int)

        /// Where the piece starts in the file.
        public var offset: Int {
            switch self {
            case .record(let offset, _, _), .damaged(let offset, _, _), .tornTail(let offset, _): offset
            }
        }

        /// How many bytes of the file it covers.
        public var length: Int {
            switch self {
            case .record(_, let sealedLength, _): InboxRecord.headerLength + sealedLength + InboxRecord.checksumLength
            case .damaged(_, let length, _), .tornTail(_, let length): length
            }
        }
    }

    /// Splits an inbox into pieces without opening anything (no key needed), reading one record at a time.
    ///
    /// The rules (LevelDB's `log_reader` is the model): a record is accepted when its magic, a plausible
    /// length and its checksum agree. After anything else, the scan looks for the next `PSIR` whose record
    /// verifies, and never trusts a length across it — the length may be the damaged field. A checksum
    /// failure whose length ends exactly at that next record (or at the end of the file) is a record whose
    /// checksum failed; a span that starts like a record and runs past the end of the file, with no intact
    /// record after it, is a torn tail; everything else between two intact records is damaged bytes.
    ///
    /// - Parameter source: the inbox's bytes.
    /// - Returns: the pieces, in file order, covering every byte.
    /// - Throws: `SecureKeysError.Code.ioError` when the source cannot be read.
    package static func layout(of source: some InboxByteSource) throws -> [Piece] {
        let size = source.count
        var pieces: [Piece] = []
        var offset = 0
        while offset < size {
            if let length = try verifiedLength(at: offset, in: source) {
                pieces.append(.record(offset: offset, sealedLength: length, checksumVerified: true))
                offset += headerLength + length + checksumLength
                continue
            }
            let next = try nextVerifiedRecord(after: offset, in: source)
            let end = next ?? size
            // Records whose checksums fail but whose headers chain, length after length, without crossing the
            // next intact record: their bytes are where their lengths say (a damaged length would have to land
            // on another header by chance). Each is opened; only its seal can prove it intact.
            let chain = try headerChain(from: offset, to: end, atEndOfFile: next == nil, in: source)
            if let last = chain.last {
                for (start, length) in chain { pieces.append(.record(offset: start, sealedLength: length, checksumVerified: false)) }
                offset = last.offset + headerLength + last.length + checksumLength
                continue
            }
            let head = try source.read(offset..<min(offset + headerLength, size))
            guard magic.starts(with: head.prefix(magic.count)) else {
                pieces.append(.damaged(offset: offset, length: end - offset, reason: "not a record"))
                offset = end
                continue
            }
            guard head.count == headerLength else {
                // Fewer than 8 bytes left, starting like a record: nothing can follow.
                pieces.append(.tornTail(offset: offset, length: size - offset))
                break
            }
            var reader = ByteReader(head, offset: magic.count)
            let length = Int(reader.readUInt32()!)
            let recordEnd = offset + headerLength + length + checksumLength
            let reason: String
            if length > maximumSealedLength {
                reason = "its length field says \(length) bytes, more than any record holds"
            } else if next == nil && recordEnd > size {
                pieces.append(.tornTail(offset: offset, length: size - offset))
                break
            } else if recordEnd > end {
                reason = "its length, \(length) bytes, runs across the intact record at byte \(end)"
            } else {
                reason = "its checksum fails and its length, \(length) bytes, does not end where the next record starts"
            }
            pieces.append(.damaged(offset: offset, length: end - offset, reason: reason))
            offset = end
        }
        return pieces
    }

    /// Whether the file ends on a record boundary.
    ///
    /// That is, whether an intact record (magic, length and checksum agreeing) ends exactly at the end of the
    /// file. An append checks this before it writes after the last record, so it reads only the file's tail, from
    /// the end back, 64 KiB at a time, at most one record's length, and never the whole file. `false` sends the
    /// caller to ``layout(of:)``, which tells a torn tail from damage.
    package static func endsOnRecordBoundary(_ source: some InboxByteSource) throws -> Bool {
        let size = source.count
        guard size > 0 else { return true }
        let window = 1 << 16
        let earliest = max(0, size - (headerLength + maximumSealedLength + checksumLength))
        var chunkEnd = size - (headerLength + SealedBox.overhead + checksumLength) + magic.count
        while chunkEnd - magic.count >= earliest {
            let chunkStart = max(earliest, chunkEnd - window - magic.count + 1)
            let chunk = try source.read(chunkStart..<min(chunkEnd, size))
            var index = chunk.count - magic.count
            while index >= 0 {
                if chunk[index] == magic[0] && chunk[index + 1] == magic[1] && chunk[index + 2] == magic[2]
                    && chunk[index + 3] == magic[3]
                {
                    let start = chunkStart + index
                    if start + headerLength <= size {
                        var reader = ByteReader(try source.read(start + magic.count..<start + headerLength))
                        let length = Int(reader.readUInt32()!)
                        if start + headerLength + length + checksumLength == size, try verifiedLength(at: start, in: source) == length {
                            return true
                        }
                    }
                }
                index -= 1
            }
            guard chunkStart > earliest else { break }
            chunkEnd = chunkStart + magic.count - 1
        }
        return false
    }

    /// The record headers that chain from `offset`.
    ///
    /// Each has magic and a plausible length, with the next header right after. The chain ends exactly at `end`
    /// (the next intact record, or the end of the file), or, at the end of the file, at a torn tail. It is empty
    /// otherwise. A length that crosses `end`, or a chain that stops at bytes that are no header, is not trusted.
    private static func headerChain(
        from offset: Int, to end: Int, atEndOfFile: Bool, in source: some InboxByteSource
    ) throws -> [(offset: Int, length: Int)] {
        var chain: [(offset: Int, length: Int)] = []
        var position = offset
        while end - position >= headerLength + SealedBox.overhead + checksumLength {
            let head = try source.read(position..<position + headerLength)
            guard Array(head[0..<magic.count]) == magic else { break }
            var reader = ByteReader(head, offset: magic.count)
            let length = Int(reader.readUInt32()!)
            guard length >= SealedBox.overhead, length <= maximumSealedLength,
                position + headerLength + length + checksumLength <= end
            else { break }
            chain.append((position, length))
            position += headerLength + length + checksumLength
        }
        if position == end { return chain }
        // Only a torn tail may follow the chain, at the end of the file: what an append cut short leaves.
        guard atEndOfFile else { return [] }
        let head = try source.read(position..<min(position + headerLength, end))
        guard magic.starts(with: head.prefix(magic.count)) else { return [] }
        guard head.count == headerLength else { return chain }
        var reader = ByteReader(head, offset: magic.count)
        let length = Int(reader.readUInt32()!)
        return length <= maximumSealedLength && position + headerLength + length + checksumLength > end ? chain : []
    }

    /// The sealed length of the record at `offset` when its magic, length and checksum agree.
    ///
    /// `nil` otherwise.
    private static func verifiedLength(at offset: Int, in source: some InboxByteSource) throws -> Int? {
        guard source.count - offset >= headerLength + checksumLength else { return nil }
        let head = try source.read(offset..<offset + headerLength)
        guard Array(head[0..<magic.count]) == magic else { return nil }
        var reader = ByteReader(head, offset: magic.count)
        let length = Int(reader.readUInt32()!)
        guard length <= maximumSealedLength, offset + headerLength + length + checksumLength <= source.count else { return nil }
        let record = try source.read(offset..<offset + headerLength + length + checksumLength)
        let body = record[..<(headerLength + length)]
        let checksum = Array(record[(headerLength + length)...])
        return KeyDerivation.constantTimeEquals(KeyDerivation.checksum(of: body, length: checksumLength), checksum) ? length : nil
    }

    /// The offset of the first record after `offset` whose magic, length and checksum agree.
    private static func nextVerifiedRecord(after offset: Int, in source: some InboxByteSource) throws -> Int? {
        let size = source.count
        let window = 1 << 16
        var start = offset + 1
        while start + headerLength + checksumLength <= size {
            let chunk = try source.read(start..<min(start + window + magic.count - 1, size))
            var index = 0
            while index + magic.count <= chunk.count {
                if chunk[index] == magic[0] && chunk[index + 1] == magic[1] && chunk[index + 2] == magic[2]
                    && chunk[index + 3] == magic[3], try verifiedLength(at: start + index, in: source) != nil
                {
                    return start + index
                }
                index += 1
            }
            start += window
        }
        return nil
    }
}
