import Foundation
internal import DiskModel
internal import SecureKeys
internal import SystemPackage
internal import Glibc

/// The kind of entry a damage step puts in the place of a file.
enum FileReplacement: Sendable, Equatable {
    /// A symbolic link to the file, moved aside.
    case symbolicLink
    /// A FIFO (a named pipe).
    case fifo
}

/// A file of the app's store that an ``AppSimulationStep/damage(_:)`` step changed, and that is not restored yet.
///
/// The damage is durable, as bit rot or a user's hand is: bytes are written and synced through the file seam, and
/// the folder of a replaced file is synced.
struct DamagedFile {
    /// The damage.
    let damage: AppSimulationStep.Damage
    /// The file's path.
    let path: String
    /// The file's bytes before the damage; `nil` when it was not there (a link or FIFO put where it would be).
    let original: [UInt8]?
    /// The file's bytes after the damage; `nil` when a link or FIFO took its place.
    let damaged: [UInt8]?
    /// The file system the store is in.
    let fileSystem: FileSystem

    /// Where a replaced file is moved to: beside it, as a user would keep a copy.
    var asidePath: String { path + ".aside" }

    /// Damages the file at `path`, in `fileSystem`, as `damage` says.
    ///
    /// - Returns: the damaged file, or `nil` when there is nothing to damage (a damage of a file's bytes, and the
    ///   file is missing or empty; a link or FIFO, and something else than a regular file is there).
    /// - Throws: a `SecureKeysError` when the file system refuses the damage.
    static func damage(_ damage: AppSimulationStep.Damage, at path: String, in fileSystem: FileSystem) throws -> DamagedFile? {
        guard let replacement = damage.replacement else {
            guard entryType(at: path) == .regular, let original = contents(of: path), !original.isEmpty else { return nil }
            let bytes = damage.apply(to: original)
            try overwrite(path, with: bytes, in: fileSystem)
            return DamagedFile(damage: damage, path: path, original: original, damaged: bytes, fileSystem: fileSystem)
        }
        let type = entryType(at: path)
        guard type == nil || type == .regular else { return nil }
        // The shared-memory index is memory SQLite rebuilds from the log (a disk model forgets it at a power cut):
        // it is removed, not kept aside.
        let movesAside = type != nil && damage.keepsOriginalAside
        if type != nil, !movesAside { try DiskIO.unlink(path, in: fileSystem) }
        let original = movesAside ? contents(of: path) : nil
        if movesAside, original == nil { return nil }
        let file = DamagedFile(damage: damage, path: path, original: original, damaged: nil, fileSystem: fileSystem)
        try DiskIO.replaceWithLinkOrFIFO(
            path, link: replacement == .symbolicLink, aside: file.asidePath, movingFileAside: original != nil, in: fileSystem)
        return file
    }

    /// Puts the file back as it was before the damage (a user restoring it from a backup).
    ///
    /// A link or FIFO is removed — never followed, never opened — and the file moved back from aside.
    ///
    /// - Throws: a `SecureKeysError` when the file system refuses.
    func restore() throws {
        guard damage.replacement != nil else {
            if let original { try Self.overwrite(path, with: original, in: fileSystem) }
            return
        }
        try DiskIO.restoreFromLinkOrFIFO(path, aside: asidePath, fileWasMovedAside: original != nil, in: fileSystem)
    }

    /// What changed the damaged file since the damage, or `nil` when it is as the damage left it.
    ///
    /// The library must report damage and leave it: never remove, overwrite or replace a damaged file, nor the
    /// original moved aside.
    var changeSinceDamage: String? {
        let type = Self.entryType(at: path)
        switch damage.replacement {
        case nil:
            guard type == .regular, let now = Self.contents(of: path) else { return "was removed" }
            return now == damaged ? nil : "was overwritten"
        case .symbolicLink?:
            guard type == .symbolicLink else { return "was removed or replaced" }
        case .fifo?:
            guard type == .fifo else { return "was removed or replaced" }
        }
        if let original, Self.entryType(at: asidePath) != .regular || Self.contents(of: asidePath) != original {
            return "was moved aside to \(asidePath), which was changed or removed"
        }
        return nil
    }

    /// The type of the entry at `path`, not following a link; `nil` when there is none.
    private static func entryType(at path: String) -> FileType? {
        (try? Stat(FilePath(path), followTargetSymlink: false))?.type
    }

    /// The bytes of the regular file at `path`, or `nil` when it cannot be read.
    ///
    /// Only ever called on a regular file: a FIFO's open would wait for a writer.
    private static func contents(of path: String) -> [UInt8]? {
        try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Replaces the contents of the file at `path` by `bytes`, in place, and syncs them.
    ///
    /// It writes through the file seam, so the disk model records the bytes as synced.
    private static func overwrite(_ path: String, with bytes: [UInt8], in fileSystem: FileSystem) throws {
        let file = try DiskIO.open(path, flags: O_RDWR, in: fileSystem)
        defer { file.close() }
        try file.truncate(to: 0)
        try file.write(bytes)
        try file.sync()
    }
}
