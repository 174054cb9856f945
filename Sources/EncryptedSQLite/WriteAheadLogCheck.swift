import Glibc
import SystemPackage

/// Finds damage in a write-ahead log that SQLite's recovery would take for a torn write, silently dropping
/// committed transactions.
///
/// The log (SQLite's file format, section 4): a 32-byte header — magic `0x377f0682` or `0x377f0683` (its low
/// bit: checksums over big-endian words), version, page size, checkpoint sequence, salt-1, salt-2, and a
/// checksum of the first 24 bytes — then frames: a 24-byte header (page number, the database size in pages
/// for a commit frame or 0, salt-1, salt-2, checksum-1, checksum-2) and one page. Each frame's checksum chains
/// from the previous one's (the header's, for the first) over the frame header's first 8 bytes and the page
/// (`walChecksumBytes`, `walDecodeFrame` in SQLite's `wal.c`); with SQLCipher the page is the encrypted page,
/// exactly as written. Recovery (`walIndexRecover`) reads frames while their salts match the header's and
/// their checksums verify, and keeps what the last verified commit frame committed: after a bad frame, every
/// later transaction is dropped without a word, because a torn write looks the same.
///
/// What tells damage from a torn write here: the frames *after* a bad one still verify when chained from its
/// stored checksum (only its contents changed), and they hold the commit of a transaction later than the
/// bad frame's own. With `synchronous = FULL`, a transaction is only written after the one before it was
/// synced, so a commit after the bad frame's transaction proves that transaction had reached the disk intact
/// — it was acknowledged, and so were the ones after it. A bad frame in the last transaction cannot be told
/// from a write torn by a crash during its commit (which was never acknowledged), and is left to SQLite.
/// The same reasoning covers the log header, which is written with the log's first transaction.
///
/// Only a log left by a connection that synced every commit can be judged this way: with `synchronous =
/// NORMAL`, a power cut may tear several unsynced transactions, which is not damage.
struct WriteAheadLogCheck {
    /// The magic number without its byte-order bit.
    static let magic: UInt32 = 0x377f_0682
    static let headerLength = 32
    static let frameHeaderLength = 24

    /// Damage that recovery would silently step over.
    struct Damage: Equatable {
        /// The first frame that fails (1-based, as SQLite counts), or `nil` for the log header.
        var frame: Int?
        /// Its byte offset in the log.
        var offset: Int
        /// How many commit frames verify after the damage.
        ///
        /// They are the committed transactions recovery would drop.
        var committedTransactions: Int

        /// Where, in words.
        var place: String {
            if let frame { "frame \(frame) (byte offset \(offset))" } else { "the log header (bytes 0–31)" }
        }
    }

    /// The log's path, for errors.
    let path: String
    /// The database's page size, for a header whose page size field is itself damaged.
    let expectedPageSize: Int

    /// Reads the log at ``path`` and returns the damage recovery would step over, or `nil`.
    ///
    /// It returns `nil` for no log, an empty or sound one, or one whose only failure is a torn last
    /// transaction.
    ///
    /// - Throws: `StoreError.Code.storeUnavailable` when the log exists but cannot be read.
    func findDamage() throws -> Damage? {
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(path, .readOnly, options: [.noFollow, .closeOnExec])
        } catch Errno.noSuchFileOrDirectory {
            return nil
        } catch {
            throw StoreError(code: .storeUnavailable, message: "cannot open the write-ahead log to check it (\(error))", path: path)
        }
        defer { try? descriptor.close() }
        let size: Int64
        do throws(Errno) { size = try descriptor.stat().size } catch {
            throw StoreError(code: .storeUnavailable, message: "cannot stat the write-ahead log (\(error))", path: path)
        }
        let log = Reader(descriptor: descriptor, size: Int(size), path: path)
        return try findDamage(in: log)
    }

    /// The check over any source of the log's bytes.
    func findDamage(in log: Reader) throws -> Damage? {
        guard log.size >= Self.headerLength else { return nil }
        let header = try log.read(at: 0, count: Self.headerLength)
        let magic = header.uint32(at: 0)
        let pageSize = Int(header.uint32(at: 8))
        let storedChecksum = Checksum(header.uint32(at: 24), header.uint32(at: 28))
        let salts = Array(header[16..<24])
        let bigEndian = magic & 1 == 1
        let headerIsValid =
            magic & ~1 == Self.magic && Self.isPageSize(pageSize)
            && Checksum.zero.adding(header[0..<24], bigEndian: bigEndian) == storedChecksum
        if headerIsValid {
            return try damageInFrames(
                of: log, chain: Chain(pageSize: pageSize, bigEndian: bigEndian, salts: salts), seed: storedChecksum)
        }
        // SQLite ignores the whole log. It was only ever a torn write if at most its first transaction (written
        // with the header) is in it; a later commit that verifies means the header was damaged after the fact.
        return try damageInHeader(of: log, header: header, storedChecksum: storedChecksum)
    }

    /// The frames of a log whose header verifies.
    ///
    /// They say where recovery stops, and what verifies after it.
    private func damageInFrames(of log: Reader, chain: Chain, seed: Checksum) throws -> Damage? {
        var previous = seed
        var frame = 1
        while let bytes = try chain.frame(frame, of: log) {
            guard chain.verifies(bytes, after: previous) else {
                // Recovery stops here. Count the commits of the frames that still verify after it, chained from
                // this frame's stored checksum (when its contents were changed) or from the checksum it should
                // have (when the stored one was), and this frame's own commit flag when its salts say its
                // header is the frame's.
                let own = chain.hasSalts(bytes) && bytes.uint32(at: 4) != 0 ? 1 : 0
                var later = 0
                for seed in [Chain.storedChecksum(of: bytes), chain.checksum(of: bytes, after: previous)] {
                    later = max(later, try chain.commitsVerifying(from: frame + 1, of: log, after: seed))
                }
                guard own + later >= 2 else { return nil }
                return Damage(frame: frame, offset: chain.offset(ofFrame: frame), committedTransactions: own + later)
            }
            previous = Chain.storedChecksum(of: bytes)
            frame += 1
        }
        return nil
    }

    /// A log whose header fails.
    ///
    /// It says whether its frames verify from it under any reading of the damaged header.
    private func damageInHeader(of log: Reader, header: [UInt8], storedChecksum: Checksum) throws -> Damage? {
        let magic = header.uint32(at: 0)
        // Both byte orders: the magic's low bit may be the damaged one (the stated order first).
        let orders = [magic & 1 == 1, magic & 1 == 0]
        var pageSizes = [expectedPageSize]
        let headerPageSize = Int(header.uint32(at: 8))
        if Self.isPageSize(headerPageSize) && headerPageSize != expectedPageSize { pageSizes.insert(headerPageSize, at: 0) }
        for bigEndian in orders {
            // The seed is the stored checksum, or the checksum of the header as it is (the damage was in the
            // stored checksum itself).
            let seeds = [storedChecksum, Checksum.zero.adding(header[0..<24], bigEndian: bigEndian)]
            for pageSize in pageSizes {
                let frameLength = Self.frameHeaderLength + pageSize
                guard log.size >= Self.headerLength + frameLength else { continue }
                // The salts of the first frame: the header's own may be the damaged bytes.
                let first = try log.read(at: Self.headerLength, count: Self.frameHeaderLength)
                let chain = Chain(pageSize: pageSize, bigEndian: bigEndian, salts: Array(first[8..<16]))
                for seed in seeds {
                    let commits = try chain.commitsVerifying(from: 1, of: log, after: seed)
                    if commits >= 2 { return Damage(frame: nil, offset: 0, committedTransactions: commits) }
                }
            }
        }
        return nil
    }

    /// Whether a connection of another process has the database's log open.
    ///
    /// Then the log is live, not left by a crash. SQLite's unix VFS holds a read lock on the "dead man switch"
    /// byte of the `-shm` index (byte 128, `UNIX_SHM_DMS` in `os_unix.c`, 3.15) for as long as a connection
    /// maps it. `F_GETLK` does not see the locks of this process; ``Database`` counts its own connections.
    static func isOpenInAnotherProcess(databaseAt databasePath: String) -> Bool {
        // No index: no connection has the log open.
        guard let descriptor = try? FileDescriptor.open(databasePath + "-shm", .readOnly, options: [.noFollow, .closeOnExec]) else {
            return false
        }
        defer { try? descriptor.close() }
        // Raw `fcntl(F_GETLK)`: swift-system has no call that asks for a conflicting record lock.
        var lock = flock()
        lock.l_type = Int16(F_WRLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(Self.sharedMemoryDeadManSwitch)
        lock.l_len = 1
        guard fcntl(descriptor.rawValue, F_GETLK, &lock) == 0 else { return false }
        return lock.l_type != Int16(F_UNLCK)
    }

    /// The byte of the `-shm` file every connection that maps it holds a read lock on.
    static let sharedMemoryDeadManSwitch = 128

    /// A page size SQLite accepts in a log header.
    static func isPageSize(_ size: Int) -> Bool {
        size >= 512 && size <= 65536 && size & (size - 1) == 0
    }

    // MARK: Reading

    /// The log's bytes, read at their offsets (`pread`).
    struct Reader {
        let descriptor: FileDescriptor
        let size: Int
        let path: String

        /// Exactly `count` bytes at `offset`.
        ///
        /// - Throws: `StoreError.Code.storeUnavailable` when the read fails or comes up short.
        func read(at offset: Int, count: Int) throws -> [UInt8] {
            var bytes = [UInt8](repeating: 0, count: count)
            var done = 0
            while done < count {
                let reason: String
                do {
                    let got = try bytes.withUnsafeMutableBytes {
                        try descriptor.read(
                            fromAbsoluteOffset: Int64(offset + done), into: UnsafeMutableRawBufferPointer(rebasing: $0[done...]))
                    }
                    if got > 0 {
                        done += got
                        continue
                    }
                    reason = "it ended early"
                } catch {
                    reason = "\(error)"
                }
                throw StoreError(
                    code: .storeUnavailable,
                    message: "cannot read the write-ahead log at byte \(offset + done) to check it (\(reason))", path: path)
            }
            return bytes
        }
    }

    /// The two 32-bit sums of SQLite's log checksum.
    struct Checksum: Equatable {
        var first: UInt32
        var second: UInt32

        init(_ first: UInt32, _ second: UInt32) {
            self.first = first
            self.second = second
        }

        static let zero = Checksum(0, 0)

        /// The checksum continued over `bytes` (a multiple of 8 bytes).
        ///
        /// The bytes are read as 32-bit words in the log's byte order, as `walChecksumBytes` does.
        func adding(_ bytes: ArraySlice<UInt8>, bigEndian: Bool) -> Checksum {
            var s1 = first
            var s2 = second
            bytes.withUnsafeBytes { raw in
                var index = 0
                while index + 8 <= raw.count {
                    let a = raw.loadUnaligned(fromByteOffset: index, as: UInt32.self)
                    let b = raw.loadUnaligned(fromByteOffset: index + 4, as: UInt32.self)
                    s1 = s1 &+ (bigEndian ? UInt32(bigEndian: a) : UInt32(littleEndian: a)) &+ s2
                    s2 = s2 &+ (bigEndian ? UInt32(bigEndian: b) : UInt32(littleEndian: b)) &+ s1
                    index += 8
                }
            }
            return Checksum(s1, s2)
        }
    }

    /// How the frames of one log are read and verified.
    struct Chain {
        let pageSize: Int
        let bigEndian: Bool
        /// Salt-1 and salt-2, as stored.
        let salts: [UInt8]

        var frameLength: Int { WriteAheadLogCheck.frameHeaderLength + pageSize }

        func offset(ofFrame frame: Int) -> Int { WriteAheadLogCheck.headerLength + (frame - 1) * frameLength }

        /// Frame `frame` (1-based), or `nil` when the log ends before its last byte (as recovery reads it).
        func frame(_ frame: Int, of log: Reader) throws -> [UInt8]? {
            let offset = offset(ofFrame: frame)
            guard offset + frameLength <= log.size else { return nil }
            return try log.read(at: offset, count: frameLength)
        }

        func hasSalts(_ frame: [UInt8]) -> Bool { Array(frame[8..<16]) == salts }

        /// Whether `frame` is valid after a frame whose checksum was `previous`.
        ///
        /// This follows `walDecodeFrame`. It checks the log's salts, a page number, and the checksum over its
        /// first 8 header bytes and its page.
        func verifies(_ frame: [UInt8], after previous: Checksum) -> Bool {
            guard hasSalts(frame), frame.uint32(at: 0) != 0 else { return false }
            return checksum(of: frame, after: previous) == Self.storedChecksum(of: frame)
        }

        /// The checksum `frame` must store after a frame whose checksum was `previous`.
        func checksum(of frame: [UInt8], after previous: Checksum) -> Checksum {
            previous.adding(frame[0..<8], bigEndian: bigEndian)
                .adding(frame[WriteAheadLogCheck.frameHeaderLength...], bigEndian: bigEndian)
        }

        /// The number of commit frames among the frames from `first` on that verify one after the other,
        /// starting from the checksum `seed`.
        func commitsVerifying(from first: Int, of log: Reader, after seed: Checksum) throws -> Int {
            var previous = seed
            var commits = 0
            var frame = first
            while let bytes = try self.frame(frame, of: log), verifies(bytes, after: previous) {
                if bytes.uint32(at: 4) != 0 { commits += 1 }
                previous = Self.storedChecksum(of: bytes)
                frame += 1
            }
            return commits
        }

        static func storedChecksum(of frame: [UInt8]) -> Checksum {
            Checksum(frame.uint32(at: 16), frame.uint32(at: 20))
        }
    }
}

extension Array where Element == UInt8 {
    /// The big-endian 32-bit integer at `offset` (how SQLite stores the log's header fields).
    fileprivate func uint32(at offset: Int) -> UInt32 {
        self[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }
}
