internal import DiskModel
internal import SecureKeys

/// The marker of one store creation in progress (`<store>.creating`).
///
/// Its format is v1 in <doc:/SecureKeys/KeyFileFormats>.
///
/// Creating a store makes two things, its key (by the key source) and then the store file, so a crash can fall
/// between them, or in the store's building. The marker says that a creation was interrupted: it is written,
/// durably, when a creation starts (nothing of the store exists yet), and removed once the store is built and
/// durable — or when the creation ends without making a key. A key without a store is finished as an
/// interrupted creation only when a marker is beside it and nothing shows the key's store existed; a store file
/// beside a marker of this version's creation (stage 3) is that creation's, unfinished, and built again.
/// Markers that versions before 0.2 wrote (stages 1 and 2) are still read: a second-stage one must name the
/// key, and a store file beside either is opened as it is.
struct StoreCreationMarker: Sendable, Equatable {
    /// How far the creation got.
    enum Stage: Sendable, Equatable {
        /// The store's key was being made.
        ///
        /// Which key it became is not known.
        case makingKey
        /// The key with this store identifier was made.
        ///
        /// The store was not created yet. Versions before 0.2 wrote it; this one reads it.
        case keyMade(storeID: [UInt8])
        /// The store's key was being made, and then the store built in place.
        ///
        /// Which key it became is not known. A store file beside it (and its log, index and journal) is this
        /// creation's and unfinished: nothing in it was ever acknowledged, since the marker's removal is
        /// durable before the attach returns. The next attach moves it aside and builds the store again.
        case building
    }

    /// How far the creation got.
    let stage: Stage

    static let magic: [UInt8] = Array("PSSC".utf8)
    static let formatVersion: UInt8 = 1
    static let checksumLength = 16
    /// Magic, version, stage, reserved, store identifier, checksum.
    static let fileLength = 4 + 1 + 1 + 2 + StoreKeyFile.storeIDLength + checksumLength

    /// The marker of a creation at `stage`.
    init(stage: Stage) { self.stage = stage }

    /// Parses a marker.
    ///
    /// - Throws: `SecureKeysError` `key-file-damaged` when the bytes are not a v1 marker (an empty file is
    ///   one: older versions wrote an empty marker, which names no creation), `unsupported-key-format` for
    ///   another version.
    init(bytes: [UInt8], path: String) throws {
        guard bytes.count >= Self.magic.count + 1, Array(bytes[0..<Self.magic.count]) == Self.magic else {
            throw SecureKeysError.damaged("not a store creation marker v1 (\(bytes.count) bytes, bad magic)", path: path)
        }
        guard bytes[Self.magic.count] == Self.formatVersion else {
            throw SecureKeysError.unsupportedFormat(
                "store creation marker version \(bytes[Self.magic.count]); this build reads version \(Self.formatVersion)", path: path)
        }
        guard bytes.count == Self.fileLength else {
            throw SecureKeysError.damaged("store creation marker is \(bytes.count) bytes, a v1 marker is \(Self.fileLength)", path: path)
        }
        let body = bytes[..<(Self.fileLength - Self.checksumLength)]
        guard KeyDerivation.constantTimeEquals(
            KeyDerivation.checksum(of: body, length: Self.checksumLength), Array(bytes[body.endIndex...]))
        else { throw SecureKeysError.damaged("store creation marker checksum mismatch (truncated or altered)", path: path) }
        var reader = ByteReader(bytes, offset: Self.magic.count + 1)
        let stage = reader.readUInt8()
        _ = reader.readUInt16()  // reserved
        let storeID = Array(reader.read(StoreKeyFile.storeIDLength)!)
        switch stage {
        case 1: self.stage = .makingKey
        case 2: self.stage = .keyMade(storeID: storeID)
        case 3: self.stage = .building
        default: throw SecureKeysError.damaged("store creation marker has an unknown stage \(stage ?? 0)", path: path)
        }
    }

    /// The marker's bytes.
    var bytes: [UInt8] {
        var writer = ByteWriter()
        writer.write(Self.magic)
        writer.write(Self.formatVersion)
        switch stage {
        case .makingKey:
            writer.write(UInt8(1))
            writer.write(UInt16(0))
            writer.write([UInt8](repeating: 0, count: StoreKeyFile.storeIDLength))
        case .keyMade(let storeID):
            writer.write(UInt8(2))
            writer.write(UInt16(0))
            writer.write(storeID)
        case .building:
            writer.write(UInt8(3))
            writer.write(UInt16(0))
            writer.write([UInt8](repeating: 0, count: StoreKeyFile.storeIDLength))
        }
        writer.write(KeyDerivation.checksum(of: writer.bytes[...], length: Self.checksumLength))
        return writer.bytes
    }

    /// Whether this marker names the key its source records as `record`.
    ///
    /// If so, the creation it describes made that key.
    func names(_ record: StoreKeyRecord) -> Bool {
        guard case .keyMade(let storeID) = stage else { return false }
        return storeID == record.storeID
    }

    /// The marker at `path`, or `nil` when there is none.
    ///
    /// - Throws: `SecureKeysError` when it cannot be read or is not a v1 marker.
    static func read(at path: String) throws -> StoreCreationMarker? {
        guard SecureFile.exists(path) else { return nil }
        return try StoreCreationMarker(bytes: try SecureFile.read(path, maximumSize: 4096), path: path)
    }

    /// Writes the marker at `path` atomically (temporary file, `fsync`, `rename`), replacing the one there, and
    /// syncs its folder, so that the marker survives a crash from now on.
    ///
    /// - Parameter fileSystem: the file system the store is in.
    /// - Throws: `SecureKeysError` `io-error`.
    func write(to path: String, in fileSystem: FileSystem) throws {
        try SecureFile.writeAtomically(bytes, to: path, replacing: true, in: fileSystem)
    }

    /// Removes the marker at `path`, if any.
    ///
    /// - Parameter syncingFolder: whether the folder is synced, so the removal survives a crash. Without it (a
    ///   store whose inbox key file is made next, or whose new log SQLite syncs next, each with a folder sync)
    ///   a crash before the folder's next sync may bring the marker back beside the store: beside a store of a
    ///   version before 0.2 the next attach ignores it and removes it again; beside a store built here (stage 3)
    ///   nothing was acknowledged yet, and the next attach moves the store aside and builds it again.
    /// - Parameter fileSystem: the file system the store is in.
    /// - Throws: `SecureKeysError` `io-error`.
    static func remove(at path: String, syncingFolder: Bool = true, in fileSystem: FileSystem) throws {
        guard SecureFile.exists(path) else { return }
        try DiskIO.unlink(path, in: fileSystem)
        if syncingFolder { try DiskIO.syncDirectory(SecureFile.folder(containing: path), in: fileSystem) }
    }
}
