public import StoreErrors

extension StoreError.Code {
    /// The device agent refused this client.
    ///
    /// The reason is another user, too many clients at once, a malformed or oversized request, or another
    /// protocol version.
    public static let agentRefused = Self("agent-refused")
    /// The device agent went away (it stopped or was killed) while this client talked to it.
    public static let agentDisconnected = Self("agent-disconnected")
    /// The device agent could not start.
    ///
    /// Its socket cannot be made where the state directory is.
    public static let agentFailed = Self("agent-failed")
    /// The process serving the state directory's socket runs as another user.
    ///
    /// This process sent it nothing (no hello, no passcode) and does not use it.
    public static let untrustedAgent = Self("untrusted-agent")
}

extension DeviceError {
    static func agentRefused(_ why: String) -> Self {
        Self(code: .agentRefused, message: "the device agent refused: \(why)")
    }

    static func agentDisconnected(_ directory: String) -> Self {
        Self(
            code: .agentDisconnected,
            message: "the device agent of \(directory) went away (its device state is on disk). Start it again with "
                + "`protected-store device serve --state-dir \(directory)`: a shell or a script on the directory "
                + "reconnects at its next command; an app connects again (`DeviceAgentClient.connect`)")
    }

    static func agentNotAnswering(_ directory: String, within timeout: Duration) -> Self {
        Self(
            code: .agentDisconnected,
            message: "the device agent of \(directory) did not answer within \(timeout.spoken): it is stopped (Ctrl-Z, "
                + "SIGSTOP) or stuck; this process no longer uses it")
    }

    static func untrustedAgent(socket path: String, user: String, you: String) -> Self {
        Self(
            code: .untrustedAgent,
            message: "the process serving \(path) runs as \(user), not as you, \(you): nothing was "
                + "sent to it, not even a hello, and no passcode ever will be. Only your own `protected-store device serve` "
                + "is a device agent of yours: stop the other one, or use a state directory of your own")
    }

    package static func agentFailed(_ why: String) -> Self {
        Self(code: .agentFailed, message: "the device agent cannot start: \(why)")
    }
}
