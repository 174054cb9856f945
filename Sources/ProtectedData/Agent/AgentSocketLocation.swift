import Glibc
import SecureKeys

/// Where a device agent's socket is, and how a client finds it from the state directory alone.
///
/// A plain agent listens at `STATE-DIR/agent/device.sock`. An agent given a runtime directory
/// (``DeviceAgent/Configuration/runtimeDirectory``; `device serve --session` passes `$XDG_RUNTIME_DIR`, the
/// user's own tmpfs folder that logind makes mode 0700 and removes at logout) listens at
/// `RUNTIME/protected-store/device-DEV-INODE.sock` instead, and writes that path into
/// `STATE-DIR/agent/socket-location` (mode 0600) after it listens, so every client — an app, a shell, a helper
/// process whose environment has no `XDG_RUNTIME_DIR` — still needs only the state directory. The name comes from
/// the state directory's device and inode numbers, in fixed-width hexadecimal: short whatever the state directory's
/// path (`sun_path` holds 107 bytes), and the same for every agent of that directory, so the next agent replaces a
/// socket a killed one left.
///
/// Only the agent, which holds the state directory's lock, writes or removes either entry; at start it removes the
/// one of the other kind that a killed agent may have left. A client trusts a named socket only in folders of
/// its user's alone (invariant 10): the socket's folder is this user's and writable by nobody else, and so is every
/// folder above it unless owned by root (or sticky, as `/tmp`); the kernel then says who listens (`SO_PEERCRED`),
/// as for the plain socket. A named socket that is gone (the runtime directory removed at logout) or refuses the
/// connection (its agent was killed) means no agent, exactly as a stale plain socket does.
enum AgentSocketLocation {
    /// The folder the sockets go in, under the runtime directory.
    static let runtimeFolderName = "protected-store"

    /// The socket of the agent of the state directory with `device` and `inode` numbers, under `runtimeDirectory`.
    static func runtimeSocketPath(under runtimeDirectory: String, device: UInt64, inode: UInt64) -> String {
        "\(trimmed(runtimeDirectory))/\(runtimeFolderName)/device-\(hex(device))-\(hex(inode)).sock"
    }

    /// The longest ``runtimeSocketPath(under:device:inode:)`` can be under `runtimeDirectory`.
    ///
    /// It is checked to fit before anything is made.
    static func longestRuntimeSocketPath(under runtimeDirectory: String) -> String {
        runtimeSocketPath(under: runtimeDirectory, device: .max, inode: .max)
    }

    /// The socket of the agent serving `stateDirectory`, if one may be there.
    ///
    /// It is the plain socket, or the one the state directory's `agent/socket-location` names. Nothing is
    /// connected to.
    ///
    /// - Returns: the path, or `nil` when neither is there (no agent, or a named socket that is gone).
    /// - Throws: `SecureKeysError` with `insecure-state-directory` when the state directory, its `agent/` folder,
    ///   the named socket's folder or a folder above it is another user's or writable by others;
    ///   `DeviceError.Code.deviceStateDamaged` when `agent/socket-location` names no absolute path that fits a socket
    ///   address; `SecureKeysError` when that file is not this user's 0600 regular file.
    static func find(in stateDirectory: String) throws -> String? {
        let layout = DeviceLayout(root: stateDirectory, fileSystem: .real)
        let plain = SecureFile.exists(layout.agentSocketPath)
        guard plain || SecureFile.exists(layout.agentSocketLocationPath) else { return nil }
        // Only a socket in folders of this user's alone is one of its own agents (invariant 10)...
        try PrivateDirectory.check(stateDirectory)
        try PrivateDirectory.check(layout.agentDirectory, ancestors: false)
        if plain { return layout.agentSocketPath }
        let named = try read(layout.agentSocketLocationPath)
        // The runtime directory went (a logout): its agent is gone with it.
        guard SecureFile.exists(named) else { return nil }
        // ...wherever the socket is: its folder and those above it.
        try PrivateDirectory.check(SecureFile.folder(containing: named))
        return named
    }

    /// Writes `socketPath` into `agent/socket-location`, atomically.
    ///
    /// A client reads the old path or the new one.
    static func record(_ socketPath: String, in layout: DeviceLayout) throws {
        try SecureFile.writeAtomically(Array((socketPath + "\n").utf8), to: layout.agentSocketLocationPath, replacing: true, in: .real)
    }

    /// The path `agent/socket-location` names.
    ///
    /// The file holds one absolute path, a newline after it.
    private static func read(_ path: String) throws -> String {
        let bytes = try SecureFile.read(path, maximumSize: 4096)
        guard bytes.last == UInt8(ascii: "\n"), let text = String(validating: bytes.dropLast(), as: UTF8.self) else {
            throw DeviceError.stateDamaged(path, "it does not hold one line of UTF-8 text naming the device agent's socket")
        }
        guard text.hasPrefix("/"), !text.utf8.contains(0), !text.utf8.contains(UInt8(ascii: "\n")) else {
            throw DeviceError.stateDamaged(path, "it names no absolute socket path")
        }
        do {
            _ = try UnixSocket.address(text)
        } catch {
            throw DeviceError.stateDamaged(path, "the socket path it names is \(text.utf8.count) bytes, longer than a socket address holds")
        }
        return text
    }

    /// `path` without its trailing slashes (`/` stays).
    private static func trimmed(_ path: String) -> String {
        var path = Substring(path)
        while path.count > 1 && path.hasSuffix("/") { path = path.dropLast() }
        return String(path)
    }

    /// 16 lower-case hexadecimal digits.
    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
