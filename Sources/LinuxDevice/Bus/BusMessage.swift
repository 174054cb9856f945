internal import CSystemd

/// A D-Bus message (a reply or a signal), read front to back.
///
/// The reference is released in `deinit`.
final class BusMessage {
    private let handle: OpaquePointer

    /// Takes over a reference the caller owns.
    init(owning handle: OpaquePointer) { self.handle = handle }

    /// Takes a reference of its own to a message sd-bus lends a callback.
    init(borrowing handle: OpaquePointer) { self.handle = sd_bus_message_ref(handle) }

    deinit { sd_bus_message_unref(handle) }

    /// The sender's unique name (`:1.42`), if the message has one.
    var sender: String? { sd_bus_message_get_sender(handle).map { String(cString: $0) } }
    /// The object path a signal was sent from.
    var path: String? { sd_bus_message_get_path(handle).map { String(cString: $0) } }
    /// The interface of a signal.
    var interface: String? { sd_bus_message_get_interface(handle).map { String(cString: $0) } }
    /// The member (signal name).
    var member: String? { sd_bus_message_get_member(handle).map { String(cString: $0) } }

    /// Reads a boolean.
    func readBool() throws(BusFailure) -> Bool {
        var value: Int32 = 0
        try check(sd_bus_message_read_basic(handle, BusType.bool, &value))
        return value != 0
    }

    /// Reads a `u`.
    func readUInt32() throws(BusFailure) -> UInt32 {
        var value: UInt32 = 0
        try check(sd_bus_message_read_basic(handle, BusType.uint32, &value))
        return value
    }

    /// Reads a string.
    func readString() throws(BusFailure) -> String { try readText(BusType.string) }

    /// Reads an object path.
    func readObjectPath() throws(BusFailure) -> String { try readText(BusType.objectPath) }

    private func readText(_ type: CChar) throws(BusFailure) -> String {
        var value: UnsafePointer<CChar>?
        try check(sd_bus_message_read_basic(handle, type, &value))
        return value.map { String(cString: $0) } ?? ""
    }

    /// Enters a container (`r` with contents `so`, `a` with `(susso)`).
    ///
    /// - Returns: `false` at the end of an array: no element left to enter.
    func enter(_ type: CChar, _ contents: String) throws(BusFailure) -> Bool {
        let result = sd_bus_message_enter_container(handle, type, contents)
        try check(result)
        return result > 0
    }

    /// Leaves the container entered last.
    func exit() throws(BusFailure) { try check(sd_bus_message_exit_container(handle)) }

    /// The names of the properties a `PropertiesChanged` signal announces.
    ///
    /// They are its changed and its invalidated ones, read from the signal's start (`s a{sv} as`).
    func announcedProperties() throws(BusFailure) -> Set<String> {
        var names: Set<String> = []
        _ = try readString()
        guard try enter(BusType.array, "{sv}") else { return names }
        while try enter(BusType.dictEntry, "sv") {
            names.insert(try readString())
            try skip("v")
            try exit()
        }
        try exit()
        guard try enter(BusType.array, "s") else { return names }
        while true {
            var value: UnsafePointer<CChar>?
            let result = sd_bus_message_read_basic(handle, BusType.string, &value)
            try check(result)
            guard result > 0, let value else { break }
            names.insert(String(cString: value))
        }
        try exit()
        return names
    }

    /// Skips values of the types `types`.
    func skip(_ types: String) throws(BusFailure) { try check(sd_bus_message_skip(handle, types)) }

    private func check(_ result: Int32) throws(BusFailure) {
        if result < 0 { throw BusFailure.local(result) }
    }
}
