internal import CSystemd

/// Whether this process can be dumped.
///
/// Dumping means a core file written at a crash (systemd-coredump keeps them on disk), and a ptrace attach or a read
/// of `/proc/PID/mem` by the user's other processes.
///
/// A process that holds keys — the device agent, a shell, an app with a ``SessionDevice`` — calls
/// ``disableForThisProcess()`` first thing, before any key is in its memory: a dump would write whatever it
/// holds to disk, unwrapped. The `protected-store` tool does it at its start. Guarded memory (`SecureBytes`)
/// is already left out of a core file; this keeps out everything else (a key on its way in, a passcode typed).
public enum CoreDumps: Sendable {
    /// Makes this process non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`).
    ///
    /// There is then no core file, and no attach or memory read by the user's other processes (root with
    /// `CAP_SYS_PTRACE` still can). Calling it twice is harmless; a program it `exec`s starts dumpable again.
    ///
    /// - Returns: whether the process is now non-dumpable (`false` only where `prctl` itself fails).
    @discardableResult
    public static func disableForThisProcess() -> Bool {
        protectedstore_set_dumpable(0) == 0 && !isThisProcessDumpable
    }

    /// Whether this process is dumpable now (`prctl(PR_GET_DUMPABLE)` not 0).
    public static var isThisProcessDumpable: Bool { protectedstore_get_dumpable() != 0 }
}
