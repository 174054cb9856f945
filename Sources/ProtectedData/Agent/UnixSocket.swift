import Glibc
import SecureKeys
package import SystemPackage

/// The few Unix-domain socket calls the device agent and its clients make.
///
/// `EINTR` is retried and `SIGPIPE` never raised. Descriptors are swift-system's `FileDescriptor`s and failures its
/// `Errno`. The calls swift-system has no wrapper for (`socket`, `bind`, `connect`, `send` with `MSG_NOSIGNAL`, `poll`)
/// are made on the descriptor's raw value.
package enum UnixSocket {
    /// `sockaddr_un` for `path`.
    ///
    /// - Throws: `DeviceError.Code.agentFailed` when the path does not fit (108 bytes on Linux).
    static func address(_ path: String) throws -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard path.utf8.count < capacity else {
            throw DeviceError.agentFailed("the socket path \(path) is \(path.utf8.count) bytes; at most \(capacity - 1) fit, so use a shorter --state-dir")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: path.utf8)
            buffer[path.utf8.count] = 0
        }
        return address
    }

    /// A listening socket at `path`, readable and writable by its owner only.
    ///
    /// Whatever was at `path` is removed first. Only the holder of the state directory's lock calls this, so it is a
    /// stale socket.
    static func listen(at path: String, backlog: Int32) throws -> FileDescriptor {
        var address = try address(path)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw DeviceError.agentFailed("socket() failed: \(Errno(rawValue: errno))") }
        unlink(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, 0o600) == 0, Glibc.listen(descriptor, backlog) == 0 else {
            let reason = Errno(rawValue: errno)
            close(descriptor)
            throw DeviceError.agentFailed("cannot listen on \(path): \(reason)")
        }
        return FileDescriptor(rawValue: descriptor)
    }

    /// A connected socket to `path`, or the `errno` of the failure.
    ///
    /// `ENOENT` or `ECONNREFUSED` means no agent.
    package static func connect(to path: String) throws -> Result<FileDescriptor, Errno> {
        var address = try address(path)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return .failure(Errno(rawValue: errno)) }
        while true {
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if result == 0 { return .success(FileDescriptor(rawValue: descriptor)) }
            let failure = Errno(rawValue: errno)
            if failure == .interrupted { continue }
            close(descriptor)
            return .failure(failure)
        }
    }

    /// The user id of the process at the other end, from the kernel (`SO_PEERCRED`), or `nil` if it cannot be had.
    static func peerUserID(_ descriptor: FileDescriptor) -> uid_t? {
        // Linux's `struct ucred` (pid, uid, gid), which Glibc's module map hides without _GNU_SOURCE.
        var credentials: (pid: pid_t, uid: uid_t, gid: gid_t) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(descriptor.rawValue, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
            length == socklen_t(MemoryLayout.size(ofValue: credentials))
        else { return nil }
        return credentials.uid
    }

    /// Sends all of `bytes`.
    ///
    /// With a `deadline`, never blocks past it. A peer that stops reading makes the send fail then, whatever it reads
    /// in between (`.now` fails at once if the peer's buffer is full). Without one, blocks as long as it takes. `false`
    /// when the peer is gone or too slow.
    static func sendAll(_ descriptor: FileDescriptor, _ bytes: UnsafeRawBufferPointer, deadline: ContinuousClock.Instant?) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let flags = Int32(MSG_NOSIGNAL) | (deadline == nil ? 0 : Int32(MSG_DONTWAIT))
            let sent = send(descriptor.rawValue, bytes.baseAddress! + offset, bytes.count - offset, flags)
            if sent > 0 {
                offset += sent
                continue
            }
            if sent < 0 && errno == EINTR { continue }
            guard sent < 0, errno == EAGAIN || errno == EWOULDBLOCK, let deadline,
                wait(descriptor, for: Int16(POLLOUT), until: deadline)
            else { return false }
        }
        return true
    }

    /// Waits until `descriptor` is ready for `events`, or `deadline` passes.
    ///
    /// Being closed or failed also ends the wait, and the next call reports it. `false` when the deadline passes.
    static func wait(_ descriptor: FileDescriptor, for events: Int16, until deadline: ContinuousClock.Instant) -> Bool {
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return false }
            var poller = pollfd(fd: descriptor.rawValue, events: events, revents: 0)
            let ready = poll(&poller, 1, pollMilliseconds(left))
            if ready < 0 && errno == EINTR { continue }
            return ready > 0
        }
    }

    /// `left` in whole milliseconds for `poll(2)`.
    ///
    /// It is at least 1, at most `Int32.max`, never a trap.
    private static func pollMilliseconds(_ left: Duration) -> Int32 {
        let (seconds, attoseconds) = left.components
        guard seconds < Int64(Int32.max / 1000) else { return Int32.max }
        return Int32(max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
    }

    /// How a read of an exact count ended.
    enum ReadResult: Equatable {
        /// Every byte arrived.
        case complete
        /// The peer closed before the first byte.
        case endOfFile
        /// The peer closed, failed or was too slow part-way.
        case broken
    }

    /// Reads exactly `buffer.count` bytes.
    ///
    /// With a `deadline`, the whole read must end by it.
    static func receiveExactly(
        _ descriptor: FileDescriptor, into buffer: UnsafeMutableRawBufferPointer, deadline: ContinuousClock.Instant?
    ) -> ReadResult {
        var offset = 0
        while offset < buffer.count {
            if let deadline, !wait(descriptor, for: Int16(POLLIN), until: deadline) { return .broken }
            // `read` is `recv` without flags on a socket.
            guard let count = try? descriptor.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[offset...])) else {
                return .broken
            }
            if count == 0 && offset == 0 { return .endOfFile }
            if count == 0 { return .broken }
            offset += count
        }
        return .complete
    }
}

/// Frames over a connected socket.
///
/// A frame is a 4-byte length, then the body (``AgentWireFormat``).
enum FrameChannel {
    /// What reading a frame gave.
    enum Received {
        /// A whole body, in guarded memory.
        case body(SecureBytes)
        /// The peer closed between frames.
        case closed
        /// The peer closed, failed or stalled in the middle of a frame.
        case broken
        /// The length prefix is out of bounds.
        ///
        /// The stream cannot be trusted past it.
        case malformed(AgentWireFormat.Malformed)
    }

    /// Reads one frame.
    ///
    /// Its first byte may take `firstByteTimeout` (`nil` for as long as it takes, as a client may be idle between
    /// requests). From that byte, the rest of the frame, length and body, must arrive within `timeout`.
    static func receive(_ descriptor: FileDescriptor, firstByteTimeout: Duration?, timeout: Duration?) -> Received {
        var prefix: UInt32 = 0
        var deadline: ContinuousClock.Instant?
        let header = withUnsafeMutableBytes(of: &prefix) { bytes in
            let first = UnsafeMutableRawBufferPointer(rebasing: bytes[..<1])
            switch UnixSocket.receiveExactly(descriptor, into: first, deadline: firstByteTimeout.map { .now + $0 }) {
            case .complete:
                deadline = timeout.map { .now + $0 }
                return UnixSocket.receiveExactly(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: bytes[1...]), deadline: deadline)
            case let ended:
                return ended
            }
        }
        switch header {
        case .endOfFile: return .closed
        case .broken: return .broken
        case .complete: break
        }
        let length: Int
        do {
            length = try AgentWireFormat.bodyLength(prefix: UInt32(bigEndian: prefix))
        } catch {
            return .malformed(error)
        }
        // Out of guarded memory: the frame cannot be read, and the stream cannot go on past it.
        guard let body = try? SecureBytes(count: length) else { return .broken }
        let read = (try? body.withUnsafeMutableBytes { UnixSocket.receiveExactly(descriptor, into: $0, deadline: deadline) }) ?? .broken
        return read == .complete ? .body(body) : .broken
    }

    /// Sends a whole frame, within `timeout`.
    ///
    /// `nil` means as long as it takes. Returns `false` when the peer is gone or does not take it in time.
    static func send(_ frame: SecureBytes, on descriptor: FileDescriptor, within timeout: Duration?) -> Bool {
        let deadline = timeout.map { ContinuousClock.now + $0 }
        return (try? frame.withUnsafeBytes { UnixSocket.sendAll(descriptor, $0, deadline: deadline) }) ?? false
    }
}
