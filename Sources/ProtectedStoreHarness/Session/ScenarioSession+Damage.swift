import Foundation
import Glibc
import ProtectedData
import ProtectedStore
import SecureKeys
import SystemPackage

extension ScenarioSession {
    /// Where a damageable file lives.
    package func path(of file: DamagedFile) -> String {
        switch file {
        case .inbox: storeFiles.inbox
        case .storeKey: storeFiles.key
        case .inboxKey: storeFiles.inboxKey
        // DeviceLayout (ProtectedData).
        case .keybag: stateDirectory + "/device/device.keybag"
        case .deviceState: stateDirectory + "/device/state.json"
        case .store: storeFiles.database
        case .storeLog: storeFiles.writeAheadLog
        case .storeSharedMemory: storeFiles.sharedMemory
        }
    }

    /// The contents of the file at `path`, or `nil` when it cannot be read.
    package static func contents(of path: String) -> [UInt8]? {
        try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Where `damage FILE link|fifo` moves the file it replaces.
    package func asidePath(of file: DamagedFile) -> String { path(of: file) + ".aside" }

    /// Damages `file` in place, through the file seam, and syncs it.
    ///
    /// Damage is durable, as bit rot is.
    func damage(_ file: DamagedFile, _ damage: Damage) throws {
        let path = path(of: file)
        if damage == .restore { return try restore(file, at: path) }
        if damage == .link || damage == .fifo { return try replace(file, at: path, withLink: damage == .link) }
        guard SecureFile.exists(path) else {
            throw StoreError(code: .invalidArgument, message: "damage: there is no \(file.rawValue) file (\(path)) to damage")
        }
        let original = Self.contents(of: path)
        do {
            let handle = try DiskIO.open(path, flags: O_RDWR, in: fileSystem)
            defer { handle.close() }
            let size = try handle.size()
            func overwrite(_ bytes: [UInt8], at offset: Int) throws {
                guard offset >= 0, offset + bytes.count <= size else {
                    throw StoreError(
                        code: .invalidArgument,
                        message: "damage \(file.rawValue): bytes \(offset)..<\(offset + bytes.count) are past its end (\(size) bytes)")
                }
                guard lseek(handle.descriptor, off_t(offset), SEEK_SET) == off_t(offset) else {
                    throw SecureKeysError.io("cannot seek in", path: path, errno: errno)
                }
                try handle.write(bytes)
            }
            switch damage {
            case .truncateTail(let count):
                try handle.truncate(to: max(0, size - count))
            case .truncate(let length):
                guard length <= size else {
                    throw StoreError(
                        code: .invalidArgument, message: "damage \(file.rawValue): cannot cut \(size) bytes to \(length)")
                }
                try handle.truncate(to: length)
            case .setByte(let offset, let value):
                try overwrite([value], at: offset)
            case .flipByte(let offset):
                guard offset < size else { return try overwrite([0], at: offset) }
                try overwrite([~(try SecureFile.readAll(from: FileDescriptor(rawValue: handle.descriptor), offset: offset, count: 1, path: path)[0])], at: offset)
            case .setLength(let offset, let value):
                try overwrite(withUnsafeBytes(of: value.littleEndian) { Array($0) }, at: offset + 4)
            case .restore, .link, .fifo:
                break
            }
            try handle.sync()
        } catch {
            throw StoreError(wrapping: error)
        }
        if let original, let damaged = Self.contents(of: path) { damagedFiles[file] = (original, damaged) }
        output("damage: \(file.rawValue) \(damage.scriptText)")
    }

    /// Moves `file` aside (when it exists) and puts a symbolic link to where it went, or a FIFO, in its place,
    /// durably (the folder is synced). Only a missing file may be replaced when nothing else is damaged there.
    private func replace(_ file: DamagedFile, at path: String, withLink: Bool) throws {
        guard damagedFiles[file] == nil, replacedFiles[file] == nil else {
            throw StoreError(code: .invalidArgument, message: "damage \(file.rawValue): restore its last damage first")
        }
        let aside = asidePath(of: file)
        let existed = (try? Stat(FilePath(path), followTargetSymlink: false)) != nil
        do {
            try DiskIO.replaceWithLinkOrFIFO(path, link: withLink, aside: aside, movingFileAside: existed, in: fileSystem)
        } catch {
            throw StoreError(wrapping: error)
        }
        replacedFiles[file] = (withLink, existed)
        output("damage: \(file.rawValue) \(withLink ? "link" : "fifo")\(existed ? " (the file moved to \(aside))" : "")")
    }

    /// Puts back the contents `file` had before its last damage, in place, and syncs them (a user restoring
    /// it from a backup).
    private func restore(_ file: DamagedFile, at path: String) throws {
        if let replaced = replacedFiles[file] {
            do {
                // The link or FIFO goes (never followed, never opened), and the file comes back from aside.
                try DiskIO.restoreFromLinkOrFIFO(
                    path, aside: asidePath(of: file), fileWasMovedAside: replaced.movedAside, in: fileSystem)
            } catch {
                throw StoreError(wrapping: error)
            }
            replacedFiles[file] = nil
            output("damage: \(file.rawValue) restored (\(replaced.movedAside ? "moved back" : "removed"))")
            return
        }
        guard let original = damagedFiles[file]?.original else {
            throw StoreError(
                code: .invalidArgument,
                message: "damage \(file.rawValue) restore: \(path) was not damaged since its last restore (nothing to put back)")
        }
        do {
            let handle = try DiskIO.open(path, flags: O_RDWR | O_CREAT, in: fileSystem)
            defer { handle.close() }
            try handle.truncate(to: 0)
            try handle.write(original)
            try handle.sync()
        } catch {
            throw StoreError(wrapping: error)
        }
        damagedFiles[file] = nil
        output("damage: \(file.rawValue) restored (\(original.count) bytes)")
    }
}
