#if canImport(Glibc)
import Glibc
#endif

/// Which D-Bus bus a session lock source talks to.
///
/// The production buses are fixed socket paths, never read from the environment: a process started with a
/// `DBUS_SYSTEM_BUS_ADDRESS` of someone else's choosing must not get its lock state from a bus that person
/// runs. A bus at another address is used only when the caller names it with ``address(_:)`` (tests start a
/// private `dbus-daemon` and pass its address).
public enum Bus: Sendable, Hashable, CustomStringConvertible {
    /// The machine's system bus, where systemd-logind is.
    ///
    /// Its address is `unix:path=/run/dbus/system_bus_socket`.
    case system
    /// The user's session bus, where a screen saver is.
    ///
    /// Its address is `unix:path=/run/user/UID/bus` (systemd's user bus).
    case session
    /// A test's private bus, at a D-Bus address given explicitly (`unix:path=/tmp/…`).
    case address(String)

    /// The D-Bus address connected to.
    public var address: String {
        switch self {
        case .system: "unix:path=/run/dbus/system_bus_socket"
        case .session: "unix:path=/run/user/\(getuid())/bus"
        case .address(let address): address
        }
    }

    /// `system bus (unix:path=…)`, `session bus (…)` or `bus at …`.
    public var description: String {
        switch self {
        case .system: "system bus (\(address))"
        case .session: "session bus (\(address))"
        case .address(let address): "bus at \(address)"
        }
    }
}
