package import DiskModel
import Glibc

/// The inbox's damaged-bytes file, `<store>.inbox-damaged`.
///
/// The bytes of an inbox that a merge could neither apply nor quarantine, such as spans that are not records and
/// torn tails, go there before the inbox is truncated, so no byte of an inbox is ever dropped. It is append-only,
/// 0600, and `fsync`ed before it is relied on (<doc:KeyFileFormats>).
///
/// Each span: magic `PSID` (4) ‖ u64 offset it had in the inbox ‖ u64 length ‖ `H16` of its first 64 KiB
/// (16) ‖ the bytes. The bytes are what the inbox held: sealed ciphertext or garbage, never plaintext.
package enum InboxDamagedBytes {
    static let magic: [UInt8] = Array("PSID".utf8)
    static let headerLength = 4 + 8 + 8 + 16
    /// How much of a span its fingerprint covers, and how much is copied at a time.
    static let chunkLength = 1 << 16

    /// A span of the inbox to move aside.
    package struct Span: Sendable, Hashable {
        /// Where it starts in the inbox.
        package let offset: Int
        /// How many bytes.
        package let length: Int

        package init(offset: Int, length: Int) {
            self.offset = offset
            self.length = length
        }
    }

    /// What the file holds.
    package struct Summary: Sendable, Hashable {
        /// How many spans.
        package var spans = 0
        /// How many bytes of the inbox, headers not counted.
        package var bytes = 0
    }

    /// Copies `spans` of `source` to the end of the file at `path` and `fsync`s it.
    ///
    /// The file is made 0600 when missing, its folder synced. A span already there, with the same offset, length
    /// and fingerprint, as a merge that crashed before truncating the inbox leaves it, is not copied twice. A
    /// failed write is cut back off.
    ///
    /// - Parameter fileSystem: the file system the file is in.
    /// - Returns: how many bytes were copied.
    /// - Throws: ``InboxFile/Unusable`` or `SecureKeysError.Code.ioError`; the inbox must then not be truncated.
    @discardableResult
    package static func append(
        _ spans: [Span], from source: some InboxByteSource, to path: String, in fileSystem: FileSystem
    ) throws -> Int {
        guard !spans.isEmpty else { return 0 }
        let existed = SecureFile.exists(path)
        guard let (file, size) = try InboxFile.openForUpdate(path, create: true, appending: true, in: fileSystem) else { return 0 }
        defer { file.close() }
        let known = try fingerprints(InboxBytesInFile(descriptor: file.descriptor, path: path, count: size))
        var copied = 0
        do {
            for span in spans {
                let head = try source.read(span.offset..<span.offset + min(span.length, chunkLength))
                let fingerprint = KeyDerivation.checksum(of: head[...], length: 16)
                guard !known.contains(Fingerprint(offset: span.offset, length: span.length, checksum: fingerprint)) else { continue }
                var header = ByteWriter()
                header.write(magic)
                header.write(UInt64(span.offset))
                header.write(UInt64(span.length))
                header.write(fingerprint)
                try file.write(header.bytes)
                try file.write(head)
                var done = head.count
                while done < span.length {
                    let piece = try source.read(span.offset + done..<span.offset + min(span.length, done + chunkLength))
                    try file.write(piece)
                    done += piece.count
                }
                copied += span.length
            }
            try file.sync()
            if !existed { try DiskIO.syncDirectory(SecureFile.folder(containing: path), in: fileSystem) }
        } catch {
            // Best effort: what was written of a failed copy is not a span; the inbox keeps the bytes.
            try? file.truncate(to: size)
            try? file.sync()
            throw error
        }
        return copied
    }

    /// How many spans and bytes the file at `path` holds (zero when there is none).
    ///
    /// - Throws: ``InboxFile/Unusable`` or `SecureKeysError.Code.ioError`.
    package static func summary(at path: String) throws -> Summary {
        guard let (descriptor, size) = try InboxFile.openForReading(path) else { return Summary() }
        defer { close(descriptor) }
        var summary = Summary()
        for fingerprint in try fingerprints(InboxBytesInFile(descriptor: descriptor, path: path, count: size)) {
            summary.spans += 1
            summary.bytes += fingerprint.length
        }
        return summary
    }

    private struct Fingerprint: Hashable {
        let offset: Int
        let length: Int
        let checksum: [UInt8]
    }

    /// The spans' headers, walked one by one (a file cut inside a span ends the walk).
    private static func fingerprints(_ source: some InboxByteSource) throws -> Set<Fingerprint> {
        var found: Set<Fingerprint> = []
        var offset = 0
        while offset + headerLength <= source.count {
            var reader = ByteReader(try source.read(offset..<offset + headerLength))
            guard reader.read(4).map(Array.init) == magic, let start = reader.readUInt64(), let length = reader.readUInt64(),
                let checksum = reader.read(16), length <= UInt64(source.count - offset - headerLength)
            else { break }
            found.insert(Fingerprint(offset: Int(start), length: Int(length), checksum: Array(checksum)))
            offset += headerLength + Int(length)
        }
        return found
    }
}
