package import DiskModel
package import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// The one seam between the project and the file system for every file it writes outside SQLite.
///
/// These are key files, the keybag, device state, the locked inbox and their folders.
///
/// Each call takes the ``FileSystem`` it works in, which its caller's configuration carries. On
/// ``FileSystem/real`` (every real app) it is the plain system call. On a simulated file system whose
/// ``SimulatedDisk`` covers the path, the call is also recorded in the disk, and `fsync` is recorded instead of
/// performed; see ``SimulatedDisk``. The store's own files reach the model through the `protected-store-disk`
/// SQLite VFS instead.
///
/// When a ``DiskFaultPlan`` armed on the file system holds the path (in tests and simulation only), the call
/// is counted and may fail as the plan says — before it does anything, or, for a short write, after part of
/// its bytes.
package enum DiskIO {
    /// A file open for writing (and reading), closed with ``close()``.
    package struct File {
        /// The open file.
        package let fileDescriptor: FileDescriptor
        /// The path it was opened at, for errors.
        package let path: String
        /// The file system it was opened in, which its writes, truncations and syncs go to.
        package let fileSystem: FileSystem
        private let disk: SimulatedDisk?
        private let handle: Int

        fileprivate init(_ fileDescriptor: FileDescriptor, path: String, in fileSystem: FileSystem, disk: SimulatedDisk?, handle: Int) {
            self.fileDescriptor = fileDescriptor
            self.path = path
            self.fileSystem = fileSystem
            self.disk = disk
            self.handle = handle
        }

        /// The raw descriptor, for the calls swift-system does not wrap (`flock`, `fstat`).
        package var descriptor: Int32 { fileDescriptor.rawValue }

        /// Writes every byte at the current offset (at the end, for a file opened with `O_APPEND`), retrying
        /// short and interrupted writes.
        ///
        /// - Throws: `SecureKeysError.Code.ioError` naming the path.
        package func write(_ bytes: some Collection<UInt8>) throws {
            let bytes = Array(bytes)
            switch fileSystem.faultAction(for: .write, path: path, byteCount: bytes.count) {
            case nil:
                try writeAll(bytes)
            case .fail(let code):
                throw SecureKeysError.io("cannot write", path: path, errno: code)
            case .writePart(let count):
                // A disk that fills during the write: part of it lands (and is what a cut may keep), then ENOSPC.
                var part = Array(bytes.prefix(count))
                defer { secureZero(&part) }  // a key file's bytes, maybe
                try writeAll(part)
                throw SecureKeysError.io("cannot write", path: path, errno: Errno.noSpace)
            }
        }

        private func writeAll(_ bytes: [UInt8]) throws {
            guard let disk else { return try writeBytes(bytes) }
            let size = try size()
            let appending = fcntl(descriptor, F_GETFL) & O_APPEND != 0
            var offset = size
            if !appending {
                do throws(Errno) { offset = Int(try systemCall { try fileDescriptor.seek(offset: 0, from: .current) }) } catch {
                    throw SecureKeysError.io("cannot seek", path: path, errno: error)
                }
            }
            let previous = try read(from: offset, count: max(0, min(bytes.count, size - offset)))
            try writeBytes(bytes)
            let recorded = bytes.withUnsafeBytes { new in
                previous.withUnsafeBytes { disk.wrote(handle, offset: offset, bytes: new, previous: $0, sizeBefore: size) }
            }
            guard recorded else { throw SecureKeysError.io("cannot write (the power was cut)", path: path, errno: Errno.ioError) }
        }

        private func writeBytes(_ bytes: [UInt8]) throws {
            do throws(Errno) { try systemCall { try fileDescriptor.writeAll(bytes) } } catch {
                throw SecureKeysError.io("cannot write", path: path, errno: error)
            }
        }

        /// Cuts the file to `size` bytes.
        ///
        /// - Throws: `SecureKeysError.Code.ioError` naming the path.
        package func truncate(to size: Int) throws {
            try DiskIO.failIfPlanned(.truncate, "cannot truncate", path: path, in: fileSystem)
            var removed: [UInt8] = []
            var sizeBefore = 0
            if disk != nil {
                sizeBefore = try self.size()
                removed = try read(from: size, count: max(0, sizeBefore - size))
            }
            do throws(Errno) { try systemCall { try fileDescriptor.resize(to: Int64(size)) } } catch {
                throw SecureKeysError.io("cannot truncate", path: path, errno: error)
            }
            if let disk {
                let recorded = removed.withUnsafeBytes { disk.truncated(handle, to: size, removed: $0, sizeBefore: sizeBefore) }
                guard recorded else { throw SecureKeysError.io("cannot truncate (the power was cut)", path: path, errno: Errno.ioError) }
            }
        }

        /// Makes the file's data durable (`fsync`).
        ///
        /// - Parameter purpose: why; a planted fault of a ``SimulatedDisk`` skips one purpose.
        /// - Throws: `SecureKeysError.Code.ioError` naming the path.
        package func sync(purpose: SimulatedDisk.SyncPurpose = .data) throws {
            try DiskIO.failIfPlanned(.sync, "cannot fsync", path: path, in: fileSystem)
            if let disk {
                guard disk.synced(handle, purpose: purpose) else {
                    throw SecureKeysError.io("cannot fsync (the power was cut)", path: path, errno: Errno.ioError)
                }
                return
            }
            do throws(Errno) { try fileDescriptor.sync() } catch { throw SecureKeysError.io("cannot fsync", path: path, errno: error) }
        }

        /// Closes the descriptor.
        package func close() {
            disk?.closed(handle)
            try? fileDescriptor.close()
        }

        /// The file's size now (`fstat`).
        ///
        /// - Throws: `SecureKeysError.Code.ioError` naming the file.
        package func size() throws -> Int {
            do throws(Errno) { return Int(try fileDescriptor.stat().size) } catch { throw SecureKeysError.io("cannot stat", path: path, errno: error) }
        }

        private func read(from offset: Int, count: Int) throws -> [UInt8] {
            do throws(Errno) { return try fileDescriptor.read(exactly: count, at: offset) } catch {
                throw SecureKeysError.io("cannot read", path: path, errno: error)
            }
        }
    }

    /// Opens `path` for writing with `flags`.
    ///
    /// The flags are `O_CREAT`, `O_EXCL`, `O_APPEND` and `O_TRUNC` as `open(2)` takes them. `O_CLOEXEC` and
    /// `O_NOFOLLOW` are always added.
    ///
    /// - Parameter fileSystem: the file system to open it in; the file's calls go to it too.
    /// - Throws: `SecureKeysError.Code.ioError` naming the path (`EEXIST` with `O_EXCL` for an existing file).
    package static func open(_ path: String, flags: Int32, mode: UInt32 = 0o600, in fileSystem: FileSystem) throws -> File {
        try failIfPlanned(.open, "cannot open", path: path, in: fileSystem)
        let disk = fileSystem.disk(covering: path)
        let existed = disk != nil && SecureFile.exists(path)
        let truncating = flags & O_TRUNC != 0
        let options = FileDescriptor.OpenOptions(rawValue: (flags & ~O_ACCMODE & ~O_TRUNC) | O_CLOEXEC | O_NOFOLLOW)
        let descriptor: FileDescriptor
        do throws(Errno) {
            descriptor = try systemCall {
                try FileDescriptor.open(
                    FilePath(path), FileDescriptor.AccessMode(rawValue: flags & O_ACCMODE), options: options,
                    permissions: FilePermissions(rawValue: mode_t(mode)))
            }
        } catch {
            throw SecureKeysError.io("cannot open", path: path, errno: error)
        }
        let file = File(descriptor, path: path, in: fileSystem, disk: disk, handle: disk?.opened(path, created: !existed) ?? 0)
        if truncating { try file.truncate(to: 0) }
        return file
    }

    /// `fsync`s the folder at `path`.
    ///
    /// The entries created, renamed and removed in it become durable.
    ///
    /// - Throws: `SecureKeysError.Code.ioError` naming the folder.
    package static func syncDirectory(_ path: String, purpose: SimulatedDisk.SyncPurpose = .data, in fileSystem: FileSystem) throws {
        try failIfPlanned(.syncDirectory, "cannot fsync directory", path: path, in: fileSystem)
        if let disk = fileSystem.disk(covering: path) {
            disk.syncedDirectory(path, purpose: purpose)
            return
        }
        let directory: FileDescriptor
        do throws(Errno) { directory = try systemCall { try FileDescriptor.open(FilePath(path), .readOnly, options: [.directory, .closeOnExec]) } } catch {
            throw SecureKeysError.io("cannot open directory", path: path, errno: error)
        }
        // The sync's result is the answer: a failed close of a read-only descriptor after a good sync loses nothing.
        defer { try? directory.close() }
        do throws(Errno) { try systemCall { try directory.sync() } } catch {
            throw SecureKeysError.io("cannot fsync directory", path: path, errno: error)
        }
    }

    /// `rename(from, to)`, replacing `to`.
    ///
    /// - Throws: `SecureKeysError.Code.ioError` naming `to`.
    package static func rename(_ from: String, to: String, in fileSystem: FileSystem) throws {
        try failIfPlanned(.rename, "cannot rename onto", path: to, in: fileSystem)
        do throws(DiskError) { try fileSystem.disk(covering: to)?.willRename(from, to: to) } catch { throw SecureKeysError(error) }
        do throws(Errno) { try retryOnInterrupt { Glibc.rename(from, to) } } catch {
            throw SecureKeysError.io("cannot rename onto", path: to, errno: error)
        }
    }

    /// Gives a file a second name, as `link(from, to)` does.
    ///
    /// It fails with `EEXIST` rather than replace `to`.
    ///
    /// - Throws: `SecureKeysError.Code.alreadyExists` when `to` exists, `SecureKeysError.Code.ioError` otherwise.
    package static func link(_ from: String, to: String, in fileSystem: FileSystem) throws {
        try failIfPlanned(.link, "cannot create", path: to, in: fileSystem)
        do throws(Errno) { try retryOnInterrupt { Glibc.link(from, to) } } catch {
            if error == .fileExists { throw SecureKeysError.alreadyExists(path: to) }
            throw SecureKeysError.io("cannot create", path: to, errno: error)
        }
        fileSystem.disk(covering: to)?.linked(from, to: to)
    }

    /// Removes the file at `path`.
    ///
    /// A missing file is not an error.
    ///
    /// - Throws: `SecureKeysError.Code.ioError` when it exists and cannot be removed.
    package static func unlink(_ path: String, in fileSystem: FileSystem) throws {
        try failIfPlanned(.unlink, "cannot remove", path: path, in: fileSystem)
        do throws(DiskError) { try fileSystem.disk(covering: path)?.willRemove(path) } catch { throw SecureKeysError(error) }
        do throws(Errno) { try retryOnInterrupt { Glibc.unlink(path) } } catch where error != .noSuchFileOrDirectory {
            throw SecureKeysError.io("cannot remove", path: path, errno: error)
        } catch {}
    }

    /// Removes the empty folder at `path`.
    ///
    /// A missing one is not an error. Counted as an unlink.
    ///
    /// - Throws: `SecureKeysError.Code.ioError` when it exists and cannot be removed (not empty, among others).
    package static func removeDirectory(_ path: String, in fileSystem: FileSystem) throws {
        try failIfPlanned(.unlink, "cannot remove", path: path, in: fileSystem)
        do throws(DiskError) { try fileSystem.disk(covering: path)?.willRemove(path) } catch { throw SecureKeysError(error) }
        do throws(Errno) { try retryOnInterrupt { rmdir(path) } } catch where error != .noSuchFileOrDirectory {
            throw SecureKeysError.io("cannot remove", path: path, errno: error)
        } catch {}
    }

    /// Creates the folder at `path`.
    ///
    /// An existing one is not an error.
    ///
    /// - Returns: whether it was created.
    /// - Throws: `SecureKeysError.Code.ioError` naming the folder.
    @discardableResult
    package static func makeDirectory(_ path: String, mode: UInt32 = 0o700, in fileSystem: FileSystem) throws -> Bool {
        try failIfPlanned(.makeDirectory, "cannot create directory", path: path, in: fileSystem)
        do throws(Errno) { try retryOnInterrupt { mkdir(path, mode_t(mode)) } } catch {
            if error == .fileExists { return false }
            throw SecureKeysError.io("cannot create directory", path: path, errno: error)
        }
        fileSystem.disk(covering: path)?.madeDirectory(path)
        return true
    }

    /// Throws the planned failure of a call that is not a write, if a ``DiskFaultPlan`` armed on `fileSystem`
    /// fails this one.
    fileprivate static func failIfPlanned(_ call: DiskFaultPlan.Call, _ operation: String, path: String, in fileSystem: FileSystem) throws {
        switch fileSystem.faultAction(for: call, path: path) {
        case nil: return
        case .fail(let code): throw SecureKeysError.io(operation, path: path, errno: code)
        case .writePart: throw SecureKeysError.io(operation, path: path, errno: Errno.noSpace)  // only writes are short
        }
    }
}
