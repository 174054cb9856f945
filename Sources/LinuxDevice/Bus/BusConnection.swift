internal import CSystemd
import ProtectedData
import Glibc
import SystemPackage

/// A failed D-Bus call.
///
/// It holds the error's D-Bus name when the peer answered with one, its message, and the errno sd-bus returned.
/// Internal: callers turn it into a `DeviceError` that says what was asked.
struct BusFailure: Error, Sendable, CustomStringConvertible {
    /// The error's D-Bus name, or `nil` when the call failed locally (a lost connection).
    ///
    /// For example `org.freedesktop.DBus.Error.ServiceUnknown` or `org.freedesktop.login1.NoSessionForPID`.
    var name: String?
    /// The peer's message, or the system error's text.
    var message: String
    /// The errno sd-bus returned (positive).
    var errno: Int32

    /// Whether nobody owns the destination name, as the service is not running.
    var isServiceMissing: Bool {
        name == "org.freedesktop.DBus.Error.ServiceUnknown" || name == "org.freedesktop.DBus.Error.NameHasNoOwner"
    }

    var description: String {
        if let name { return "\(name): \(message)" }
        return message
    }
}

/// An argument of a method call.
enum BusArgument {
    case uint32(UInt32)
    case string(String)
}

/// One sd-bus connection (systemd's D-Bus library, libsystemd).
///
/// It is opened at an explicit address, freed in `deinit`, and closed even when opening fails.
///
/// sd-bus is not thread-safe: a connection is used by one thread at a time — the thread that opens and sets
/// it up, then only the lock source's loop thread, which closes it before it is joined.
final class BusConnection: @unchecked Sendable {
    // @unchecked Sendable: see above; the handle is never used by two threads at once (the hand-over is
    // ordered by the thread's start, and the close by its join).
    private(set) var handle: OpaquePointer?
    /// The bus it is connected to.
    let bus: Bus

    /// Connects to `bus` as a client (Hello sent, a unique name received).
    ///
    /// - Throws: `DeviceError.Code.noBus` naming the address and the system error.
    init(_ bus: Bus) throws(DeviceError) {
        self.bus = bus
        var opened: OpaquePointer?
        var result = sd_bus_new(&opened)
        guard result >= 0, let opened else { throw DeviceError.noBus(bus, errno: -result) }
        // `sd_bus_open_system()` would honour $DBUS_SYSTEM_BUS_ADDRESS: the address is set here instead.
        result = sd_bus_set_address(opened, bus.address)
        if result >= 0 { result = sd_bus_set_bus_client(opened, 1) }
        if result >= 0 { result = sd_bus_set_description(opened, "protected-store session lock") }
        if result >= 0 { result = sd_bus_start(opened) }
        guard result >= 0 else {
            sd_bus_close_unref(opened)
            throw DeviceError.noBus(bus, errno: -result)
        }
        handle = opened
    }

    /// Closes the connection and frees it, with every match on it, detached from its event loop. Closing twice
    /// is harmless.
    func close() {
        guard let handle else { return }
        self.handle = nil
        sd_bus_detach_event(handle)
        sd_bus_close_unref(handle)
    }

    deinit { close() }

    /// The connection's socket, or `nil` once it is closed.
    var fd: Int32? {
        guard let handle else { return nil }
        let fd = sd_bus_get_fd(handle)
        return fd >= 0 ? fd : nil
    }

    /// Whether the connection is still open.
    ///
    /// It is `false` once it is closed or the peer hung up.
    var isOpen: Bool { handle.map { sd_bus_is_open($0) > 0 } ?? false }

    /// Attaches the connection to `event`.
    ///
    /// From then on the loop reads, writes and dispatches it (signals to their matches) and keeps its timeouts.
    ///
    /// - Returns: sd-bus's result: negative, an errno, on failure.
    func attach(to event: OpaquePointer) -> Int32 {
        guard let handle else { return -ENOTCONN }
        return sd_bus_attach_event(handle, event, Int32(SD_EVENT_PRIORITY_NORMAL))
    }

    /// Calls `member` and waits for its reply (sd-bus's default 25 s timeout).
    ///
    /// The call never starts a service by D-Bus activation: a lock source only listens to what runs.
    func call(
        _ destination: String, _ path: String, _ interface: String, _ member: String, _ arguments: [BusArgument] = []
    ) throws(BusFailure) -> BusMessage {
        try withHandle { handle throws(BusFailure) in
            var message: OpaquePointer?
            var result = sd_bus_message_new_method_call(handle, &message, destination, path, interface, member)
            guard result >= 0, let message else { throw BusFailure.local(result) }
            defer { sd_bus_message_unref(message) }
            _ = sd_bus_message_set_auto_start(message, 0)
            for argument in arguments {
                switch argument {
                case .uint32(var value):
                    result = sd_bus_message_append_basic(message, BusType.uint32, &value)
                case .string(let value):
                    result = value.withCString { sd_bus_message_append_basic(message, BusType.string, $0) }
                }
                guard result >= 0 else { throw BusFailure.local(result) }
            }
            var error = sd_bus_error()
            defer { sd_bus_error_free(&error) }
            var reply: OpaquePointer?
            result = sd_bus_call(handle, message, 0, &error, &reply)
            guard result >= 0, let reply else { throw BusFailure(error, result) }
            return BusMessage(owning: reply)
        }
    }

    /// Reads the property `interface.member` of `path`.
    ///
    /// It returns the reply, positioned inside its variant.
    func property(_ destination: String, _ path: String, _ interface: String, _ member: String, type: String)
        throws(BusFailure) -> BusMessage
    {
        try withHandle { handle throws(BusFailure) in
            var error = sd_bus_error()
            defer { sd_bus_error_free(&error) }
            var reply: OpaquePointer?
            let result = sd_bus_get_property(handle, destination, path, interface, member, &error, &reply, type)
            guard result >= 0, let reply else { throw BusFailure(error, result) }
            return BusMessage(owning: reply)
        }
    }

    /// Reads a boolean property.
    func boolProperty(_ destination: String, _ path: String, _ interface: String, _ member: String) throws(BusFailure) -> Bool {
        try withHandle { handle throws(BusFailure) in
            var error = sd_bus_error()
            defer { sd_bus_error_free(&error) }
            var value: Int32 = 0
            let result = sd_bus_get_property_trivial(handle, destination, path, interface, member, &error, BusType.bool, &value)
            guard result >= 0 else { throw BusFailure(error, result) }
            return value != 0
        }
    }

    /// Reads a string property.
    func stringProperty(_ destination: String, _ path: String, _ interface: String, _ member: String) throws(BusFailure) -> String {
        let reply = try property(destination, path, interface, member, type: "s")
        return try reply.readString()
    }

    /// Adds a match rule.
    ///
    /// `handler` is called on the loop thread with each message it matches. The match lives as long as the connection
    /// (a floating slot), and `handler` must too, so the caller keeps it.
    ///
    /// Sent to the bus synchronously (`AddMatch`), so no signal sent after this returns is missed.
    func addMatch(_ rule: String, _ handler: SignalHandler) throws(BusFailure) {
        try withHandle { handle throws(BusFailure) in
            let result = sd_bus_add_match(handle, nil, rule, dispatchSignal, Unmanaged.passUnretained(handler).toOpaque())
            guard result >= 0 else { throw BusFailure.local(result) }
        }
    }

    /// Runs `body` with the open connection's handle.
    ///
    /// - Throws: `BusFailure` (`ENOTCONN`, "the connection is closed") once the connection is closed, or what
    ///   `body` throws.
    private func withHandle<Result>(_ body: (OpaquePointer) throws(BusFailure) -> Result) throws(BusFailure) -> Result {
        guard let handle else { throw BusFailure(name: nil, message: "the connection is closed", errno: ENOTCONN) }
        return try body(handle)
    }
}

/// What a match calls with each message it matches, on the loop thread.
final class SignalHandler: @unchecked Sendable {
    // @unchecked Sendable: made on the setting-up thread, then only called on the loop thread.
    let handle: (BusMessage) -> Void
    init(_ handle: @escaping (BusMessage) -> Void) { self.handle = handle }
}

/// The C callback every match shares.
///
/// The user data is the match's ``SignalHandler``.
private let dispatchSignal: sd_bus_message_handler_t = { message, userdata, _ in
    guard let message, let userdata else { return 0 }
    Unmanaged<SignalHandler>.fromOpaque(userdata).takeUnretainedValue().handle(BusMessage(borrowing: message))
    return 0
}

extension BusFailure {
    /// A local failure, the errno sd-bus returned (negative), in words.
    static func local(_ result: Int32) -> BusFailure {
        BusFailure(name: nil, message: Errno(rawValue: -result).description, errno: -result)
    }

    /// A failed call, with the peer's D-Bus error or the local errno.
    fileprivate init(_ error: sd_bus_error, _ result: Int32) {
        if let name = error.name {
            self.init(
                name: String(cString: name), message: error.message.map { String(cString: $0) } ?? "", errno: -result)
        } else {
            self = .local(result)
        }
    }
}

/// The D-Bus type codes used here, as the `char` sd-bus takes.
enum BusType {
    static let bool = CChar(UInt8(ascii: "b"))
    static let uint32 = CChar(UInt8(ascii: "u"))
    static let string = CChar(UInt8(ascii: "s"))
    static let objectPath = CChar(UInt8(ascii: "o"))
    static let structure = CChar(UInt8(ascii: "r"))
    static let array = CChar(UInt8(ascii: "a"))
    static let dictEntry = CChar(UInt8(ascii: "e"))
    static let variant = CChar(UInt8(ascii: "v"))
}
