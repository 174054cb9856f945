#if canImport(Glibc)
import Glibc
#endif

extension SimulatedDisk {
    /// A change of a file's data not yet durable, with what it replaced so it can be undone.
    enum DataOperation {
        case write(offset: Int, bytes: [UInt8], previous: [UInt8], sizeBefore: Int)
        case truncate(size: Int, removed: [UInt8], sizeBefore: Int)

        static let sectorSize = 512

        /// Zeroes the bytes this operation holds (and leaves an empty operation).
        mutating func wipe() {
            switch self {
            case .write(_, var bytes, var previous, _):
                self = .truncate(size: 0, removed: [], sizeBefore: 0)  // now the arrays are this copy's alone
                secureZero(&bytes)
                secureZero(&previous)
            case .truncate(_, var removed, _):
                self = .truncate(size: 0, removed: [], sizeBefore: 0)
                secureZero(&removed)
            }
        }

        /// Restores the file as it was before this operation.
        func undo(on file: inout [UInt8]) {
            switch self {
            case .write(let offset, _, let previous, let sizeBefore):
                Self.put(previous, at: offset, into: &file)
                Self.resize(&file, to: sizeBefore)
            case .truncate(let size, let removed, let sizeBefore):
                Self.resize(&file, to: sizeBefore)
                Self.put(removed, at: size, into: &file)
            }
        }

        /// The operation as pieces a disk keeps or loses independently.
        ///
        /// These are sector-aligned parts of a write.
        var pieces: [DataOperation] {
            guard case .write(let offset, let bytes, _, _) = self else { return [self] }
            var pieces: [DataOperation] = []
            var start = offset
            while start < offset + bytes.count {
                let end = min(offset + bytes.count, (start / Self.sectorSize + 1) * Self.sectorSize)
                pieces.append(.write(offset: start, bytes: Array(bytes[(start - offset)..<(end - offset)]), previous: [], sizeBefore: 0))
                start = end
            }
            return pieces
        }

        var pieceCount: Int {
            guard case .write(let offset, let bytes, _, _) = self, !bytes.isEmpty else { return 1 }
            return (offset + bytes.count - 1) / Self.sectorSize - offset / Self.sectorSize + 1
        }

        func apply(to file: inout [UInt8]) {
            switch self {
            case .write(let offset, let bytes, _, _): Self.put(bytes, at: offset, into: &file)
            case .truncate(let size, _, _): Self.resize(&file, to: size)
            }
        }

        private static func put(_ bytes: [UInt8], at offset: Int, into file: inout [UInt8]) {
            if file.count < offset + bytes.count { file += [UInt8](repeating: 0, count: offset + bytes.count - file.count) }
            file.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
        }

        private static func resize(_ file: inout [UInt8], to size: Int) {
            if file.count > size { file.removeSubrange(size...) } else { file += [UInt8](repeating: 0, count: size - file.count) }
        }
    }
}
