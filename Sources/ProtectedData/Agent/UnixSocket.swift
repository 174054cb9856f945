#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SecureKeys

/// The few Unix-domain socket calls the device agent and its clients make, with `EINTR` retried and
/// `SIGPIPE` never raised.
package enum UnixSocket {
    /// `sockaddr_un` for `path`.
    ///
    /// - Throws: ``DeviceError/Code/agentFailed`` when the path does not fit (108 bytes on Linux).
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

    /// A listening socket at `path`, readable and writable by its owner only. Whatever was at `path` is
    /// removed first: only the holder of the state directory's lock calls this, so it is a stale socket.
    static func listen(at path: String, backlog: Int32) throws -> Int32 {
        var address = try address(path)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw DeviceError.agentFailed("socket() failed: \(String(cString: strerror(errno)))") }
        unlink(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, chmod(path, 0o600) == 0, Glibc.listen(descriptor, backlog) == 0 else {
            let reason = String(cString: strerror(errno))
            close(descriptor)
            throw DeviceError.agentFailed("cannot listen on \(path): \(reason)")
        }
        return descriptor
    }

    /// A connected socket to `path`, or the `errno` of the failure (`ENOENT`, `ECONNREFUSED`: no agent).
    package static func connect(to path: String) throws -> Result<Int32, Errno> {
        var address = try address(path)
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return .failure(Errno(errno)) }
        while true {
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if result == 0 { return .success(descriptor) }
            if errno == EINTR { continue }
            let failure = Errno(errno)
            close(descriptor)
            return .failure(failure)
        }
    }

    /// An `errno` value as an error.
    package struct Errno: Error, Sendable, Hashable, CustomStringConvertible {
        /// The value.
        package let code: Int32
        init(_ code: Int32) { self.code = code }
        /// `strerror`'s words.
        package var description: String { String(cString: strerror(code)) }
    }

    /// The user id of the process at the other end, from the kernel (`SO_PEERCRED`), or `nil` if it cannot be had.
    static func peerUserID(_ descriptor: Int32) -> uid_t? {
        // Linux's `struct ucred` (pid, uid, gid), which Glibc's module map hides without _GNU_SOURCE.
        var credentials: (pid: pid_t, uid: uid_t, gid: gid_t) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
            length == socklen_t(MemoryLayout.size(ofValue: credentials))
        else { return nil }
        return credentials.uid
    }

    /// Makes a send that cannot finish within `timeout` fail instead of blocking (a client that stopped reading).
    static func setSendTimeout(_ descriptor: Int32, _ timeout: Duration) {
        let microseconds = max(1000, timeout.components.seconds * 1_000_000 + timeout.components.attoseconds / 1_000_000_000_000)
        var timeout = timeval(tv_sec: Int(microseconds / 1_000_000), tv_usec: Int(microseconds % 1_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Sends all of `bytes`; `false` when the peer is gone or stopped reading.
    static func sendAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = send(descriptor, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if sent < 0 && errno == EINTR { continue }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
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

    /// Reads exactly `buffer.count` bytes. With a `timeout`, the whole read must end within it.
    static func receiveExactly(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer, timeout: Duration?) -> ReadResult {
        var offset = 0
        let deadline = timeout.map { ContinuousClock.now + $0 }
        while offset < buffer.count {
            if let deadline {
                let left = ContinuousClock.now.duration(to: deadline)
                guard left > .zero else { return .broken }
                var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                let ready = poll(&poller, 1, Int32(max(1, left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)))
                if ready < 0 && errno == EINTR { continue }
                if ready <= 0 { return .broken }
            }
            let count = recv(descriptor, buffer.baseAddress! + offset, buffer.count - offset, 0)
            if count < 0 && errno == EINTR { continue }
            if count == 0 && offset == 0 { return .endOfFile }
            if count <= 0 { return .broken }
            offset += count
        }
        return .complete
    }
}

/// Frames over a connected socket: a 4-byte length, then the body (``AgentWireFormat``).
enum FrameChannel {
    /// What reading a frame gave.
    enum Received {
        /// A whole body, in guarded memory.
        case body(SecureBytes)
        /// The peer closed between frames.
        case closed
        /// The peer closed, failed or stalled in the middle of a frame.
        case broken
        /// The length prefix is out of bounds: the stream cannot be trusted past it.
        case malformed(AgentWireFormat.Malformed)
    }

    /// Reads one frame: its first byte may take as long as it takes (a client may be idle between requests);
    /// the rest of the length, then the body, must each follow within `timeout`.
    static func receive(_ descriptor: Int32, bodyTimeout timeout: Duration?) -> Received {
        var prefix: UInt32 = 0
        let header = withUnsafeMutableBytes(of: &prefix) { bytes in
            switch UnixSocket.receiveExactly(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: bytes[..<1]), timeout: nil) {
            case .complete:
                UnixSocket.receiveExactly(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: bytes[1...]), timeout: timeout)
            case let ended: ended
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
        let body = SecureBytes(count: length)
        let read = (try? body.withUnsafeMutableBytes { UnixSocket.receiveExactly(descriptor, into: $0, timeout: timeout) }) ?? .broken
        return read == .complete ? .body(body) : .broken
    }

    /// Sends a whole frame; `false` when the peer is gone or stopped reading.
    static func send(_ frame: SecureBytes, on descriptor: Int32) -> Bool {
        (try? frame.withUnsafeBytes { UnixSocket.sendAll(descriptor, $0) }) ?? false
    }
}
