import ProtectedData
import Glibc
import SystemPackage

extension DeviceError {
    /// `bus` cannot be connected to.
    ///
    /// `errno` says why.
    static func noBus(_ bus: Bus, errno: Int32) -> Self {
        Self(
            code: .noBus,
            message: "cannot connect to the \(bus): \(Errno(rawValue: errno).description); the session's lock cannot be followed")
    }

    /// `bus` was lost after the device started following the session.
    ///
    /// An unlock is refused from then on.
    static func busLost(_ bus: Bus) -> Self {
        Self(
            code: .noBus,
            message: "the \(bus) went away, so the session's lock can no longer be followed: the device stays locked; "
                + "close it and boot it again once the bus is back")
    }

    /// Nobody owns `org.freedesktop.login1` on `bus`.
    static func noLogind(_ bus: Bus, _ failure: BusFailure) -> Self {
        Self(
            code: .noLogind,
            message: "systemd-logind (org.freedesktop.login1) does not answer on the \(bus): \(failure); "
                + "the session's lock cannot be followed without it")
    }

    /// logind knows no session of the process `pid` nor of the user `uid`.
    ///
    /// `what` says what was asked.
    static func noSession(uid: UInt32, pid: Int32, _ what: String) -> Self {
        Self(
            code: .noSession,
            message: "systemd-logind knows no session to follow for process \(pid) of user \(uid): \(what)")
    }
}
