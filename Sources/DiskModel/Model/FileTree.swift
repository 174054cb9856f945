import Foundation
#if canImport(Glibc)
import Glibc
#endif
import SystemPackage

/// The file-tree work a power cut does on the real folder.
///
/// It lists the folder, empties it, reads a file whole and writes one anew. Paths go to the system calls as C
/// strings, not as `FilePath`s, whose checks cost more than the calls in a debug build.
enum FileTree {
    static func exists(_ path: String) -> Bool {
        (try? Stat(path, followTargetSymlink: false)) != nil
    }

    static func isDirectory(_ path: String) -> Bool {
        (try? Stat(path, followTargetSymlink: false))?.type == .directory
    }

    /// Whether an entry is one the model leaves alone, such as a lock file or a socket.
    ///
    /// See ``SimulatedDisk``'s notes.
    static func isLeftAlone(_ name: String, type: FileType) -> Bool {
        (name.hasSuffix(".lock") && type == .regular) || type == .socket || type == .symbolicLink || type == .fifo
    }

    /// Every path under `root` (not `root` itself), with whether it is a folder.
    ///
    /// `-shm` files, lock files and `skipping` are left out.
    static func list(_ root: String, skipping: String) -> [(String, Bool)] {
        var result: [(String, Bool)] = []
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return result }
        for name in names.sorted() {
            let path = root + "/" + name
            guard path != skipping, !name.hasSuffix("-shm") else { continue }
            guard let type = (try? Stat(path, followTargetSymlink: false))?.type else { continue }
            let isDirectory = type == .directory
            // Only files and folders hold data, and lock files hold none the model keeps.
            guard isDirectory || type == .regular, !isLeftAlone(name, type: type) else { continue }
            result.append((path, isDirectory))
            if isDirectory { result += list(path, skipping: skipping) }
        }
        return result
    }

    /// Removes `path` and everything under it.
    ///
    /// With `keepingLockFiles`, it keeps what the model leaves alone (``isLeftAlone(_:type:)``: lock files, sockets,
    /// symbolic links, FIFOs) and the folders that hold one.
    ///
    /// - Returns: whether something was kept.
    /// - Throws: ``DiskError/io(operation:path:errno:)`` naming what could not be removed.
    @discardableResult
    static func remove(_ path: String, keepingRoot: Bool = false, keepingLockFiles: Bool = false) throws(DiskError) -> Bool {
        guard let type = (try? Stat(path, followTargetSymlink: false))?.type else { return false }
        if type == .directory {
            var kept = false
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] {
                if try remove(path + "/" + name, keepingLockFiles: keepingLockFiles) { kept = true }
            }
            if kept || keepingRoot { return kept }
            do throws(Errno) { try retryOnInterrupt { rmdir(path) } } catch { throw .io(operation: "cannot remove", path: path, errno: error) }
        } else if keepingLockFiles && isLeftAlone(path, type: type) {
            return true
        } else {
            do throws(Errno) { try retryOnInterrupt { unlink(path) } } catch { throw .io(operation: "cannot remove", path: path, errno: error) }
        }
        return false
    }

    /// The whole content of the file at `path`.
    ///
    /// - Throws: ``DiskError/io(operation:path:errno:)`` naming the file.
    static func read(_ path: String) throws(DiskError) -> [UInt8] {
        let file: FileDescriptor
        do throws(Errno) { file = try systemCall { try FileDescriptor.open(path, .readOnly, options: .closeOnExec) } } catch {
            throw .io(operation: "cannot open", path: path, errno: error)
        }
        defer { try? file.close() }
        let size: Int
        do throws(Errno) { size = Int(try file.stat().size) } catch { throw .io(operation: "cannot stat", path: path, errno: error) }
        do throws(Errno) { return try file.read(exactly: size, at: 0) } catch { throw .io(operation: "cannot read", path: path, errno: error) }
    }

    /// Creates the file at `path` (it must not exist) with `bytes` and `mode`.
    ///
    /// - Throws: ``DiskError/io(operation:path:errno:)`` naming the file.
    static func writeNew(_ path: String, _ bytes: [UInt8], mode: mode_t) throws(DiskError) {
        let file: FileDescriptor
        do throws(Errno) {
            file = try systemCall {
                try FileDescriptor.open(
                    path, .writeOnly, options: [.create, .exclusiveCreate, .closeOnExec],
                    permissions: FilePermissions(rawValue: mode))
            }
        } catch {
            throw .io(operation: "cannot recreate", path: path, errno: error)
        }
        do throws(Errno) { try systemCall { try file.closeAfter { try file.writeAll(bytes) } } } catch {
            throw .io(operation: "cannot write", path: path, errno: error)
        }
    }
}

/// Zeroes an array that held file bytes (a key file's, maybe) in place, with a call the optimiser may not remove.
func secureZero(_ array: inout [UInt8]) {
    array.withUnsafeMutableBytes { buffer in
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        explicit_bzero(base, buffer.count)
    }
}
