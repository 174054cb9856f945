public import SecureKeys

/// The device agent's wire format.
///
/// A frame is a 4-byte big-endian length, then that many bytes of body. The body is a kind byte, a 4-byte request
/// id (0 for a pushed event), and the kind's fields.
///
/// Fields are fixed-width big-endian integers, booleans as one byte 0 or 1, and byte strings as a 4-byte
/// length then the bytes; text must be UTF-8. A body with an unknown kind, a field out of range, a length
/// past its end or bytes left over is malformed. Frames are at most ``maximumBodyBytes``.
///
/// Frames are built in guarded memory (`SecureBytes`): a passcode or a store key is never in an array.
@_spi(DeviceAgentWire)
public enum AgentWireFormat: Sendable {
    /// The protocol version `hello` carries.
    ///
    /// An agent refuses any other. In version 2, `setUp` and `changePasscode` end with a byte saying whether an
    /// empty passcode was asked for. Version 3 adds `authenticate` (kind 11).
    public static let protocolVersion: UInt32 = 3
    /// The largest body a frame may carry, 64 KiB.
    ///
    /// A store path is at most 4 KiB, so no request comes near it.
    public static let maximumBodyBytes = 64 * 1024
    /// The length prefix.
    public static let headerBytes = 4
    /// The longest grace period or clock advance a request may carry, 100 years.
    ///
    /// Longer is malformed, so no client can push the device's clock toward the end of `Duration`'s milliseconds.
    public static let maximumRequestDuration = DeviceRules.maximumGracePeriod

    /// A body that is not a well-formed frame, and what is wrong with it.
    public struct Malformed: Error, Sendable, Hashable, CustomStringConvertible {
        /// What is wrong.
        public let reason: String
        /// The reason.
        public var description: String { reason }
    }

    /// A request in a frame, with its id and what it asks.
    public struct RequestFrame: Sendable {
        /// The id its answer carries.
        public var id: UInt32
        /// What it asks.
        public var request: AgentRequest
    }

    /// A reply in a frame.
    ///
    /// It carries the id of the request it answers (0 for an event) and what it says.
    public struct ReplyFrame: Sendable {
        /// The id of the request it answers.
        ///
        /// 0 for a pushed event or a refusal of the connection.
        public var id: UInt32
        /// What it says.
        public var reply: AgentReply
    }

    // MARK: Encoding

    /// The frame (length prefix included) of `request`, in guarded memory.
    ///
    /// - Throws: `SecureKeysError` with `out-of-memory` when the guarded memory cannot be allocated.
    public static func encode(_ request: AgentRequest, id: UInt32) throws -> SecureBytes {
        try frame { writer in
            writer.u32(0)  // the length prefix, written once the size is known
            switch request {
            case .hello(let version, let name):
                writer.header(kind: 1, id: id)
                writer.u32(version)
                writer.text(name)
            case .status:
                writer.header(kind: 2, id: id)
            case .setUp(let passcode, let grace, let wipeAfter, let allowsEmpty):
                writer.header(kind: 3, id: id)
                writer.secret(passcode)
                writer.duration(grace)
                writer.optionalCount(wipeAfter)
                writer.bool(allowsEmpty)
            case .unlock(let passcode):
                writer.header(kind: 4, id: id)
                writer.secret(passcode)
            case .lock:
                writer.header(kind: 5, id: id)
            case .changePasscode(let old, let new, let allowsEmpty):
                writer.header(kind: 6, id: id)
                writer.secret(old)
                writer.secret(new)
                writer.bool(allowsEmpty)
            case .lookUpStoreKey(let path):
                writer.header(kind: 7, id: id)
                writer.text(path)
            case .createStoreKey(let path, let protectionClass):
                writer.header(kind: 8, id: id)
                writer.text(path)
                writer.u8(protectionClass.rawValue)
            case .advanceClock(let duration):
                writer.header(kind: 9, id: id)
                writer.duration(duration)
            case .reboot:
                writer.header(kind: 10, id: id)
            case .authenticate(let passcode):
                writer.header(kind: 11, id: id)
                writer.secret(passcode)
            }
        }
    }

    /// The frame (length prefix included) of `reply`, in guarded memory.
    ///
    /// - Throws: `SecureKeysError` with `out-of-memory` when the guarded memory cannot be allocated.
    public static func encode(_ reply: AgentReply, id: UInt32) throws -> SecureBytes {
        try frame { writer in
            writer.u32(0)  // the length prefix, written once the size is known
            switch reply {
            case .status(let status):
                writer.header(kind: 0x81, id: id)
                writer.status(status)
            case .failure(let failure):
                writer.header(kind: 0x82, id: id)
                writer.u8(failure.domain.rawValue)
                writer.text(failure.code)
                writer.text(failure.message)
                writer.optionalDuration(failure.retryAfter)
                writer.optionalCount(failure.failedAttempts)
            case .storeKey(let lookup):
                writer.header(kind: 0x83, id: id)
                switch lookup {
                case .absent:
                    writer.u8(0)
                case .locked(let protectionClass):
                    writer.u8(1)
                    writer.u8(protectionClass.rawValue)
                case .available(let key):
                    writer.u8(2)
                    writer.secret(key)
                }
            case .event(let event, let status):
                writer.header(kind: 0x84, id: id)
                let kind: UInt8 =
                    switch event {
                    case .willBecomeUnavailable: 1
                    case .didBecomeUnavailable: 2
                    case .didBecomeAvailable: 3
                    }
                writer.u8(kind)
                writer.status(status)
            }
        }
    }

    /// Runs `body` twice, once to measure and once to write into guarded memory of that size.
    ///
    /// The first four bytes it writes are then replaced by the body's length.
    private static func frame(_ body: (inout FrameWriter) -> Void) throws -> SecureBytes {
        var measure = FrameWriter(buffer: nil)
        body(&measure)
        let frame = try SecureBytes(count: measure.count)
        // `withUnsafeMutableBytes` only throws for a wiped buffer, and this one is new.
        try! frame.withUnsafeMutableBytes { buffer in
            var writer = FrameWriter(buffer: buffer)
            body(&writer)
            var writeLength = FrameWriter(buffer: buffer)
            writeLength.u32(UInt32(measure.count - headerBytes))
        }
        return frame
    }

    // MARK: Decoding

    /// The request in a frame's body (the bytes after the length prefix).
    ///
    /// - Throws: ``Malformed`` naming what is wrong.
    public static func decodeRequest(_ body: UnsafeRawBufferPointer) throws(Malformed) -> RequestFrame {
        var reader = FrameReader(bytes: body)
        let kind = try reader.u8("kind")
        let id = try reader.u32("request id")
        let request: AgentRequest
        switch kind {
        case 1: request = .hello(protocolVersion: try reader.u32("protocol version"), clientName: try reader.text("client name"))
        case 2: request = .status
        case 3:
            request = .setUp(
                passcode: try reader.secret("passcode"), gracePeriod: try reader.duration("grace period", atMost: maximumRequestDuration),
                wipeAfterFailures: try reader.optionalCount("wipe-after"), allowsEmptyPasscode: try reader.bool("allow-empty-passcode"))
        case 4: request = .unlock(passcode: try reader.secret("passcode"))
        case 5: request = .lock
        case 6:
            request = .changePasscode(
                old: try reader.secret("old passcode"), new: try reader.secret("new passcode"),
                allowsEmptyPasscode: try reader.bool("allow-empty-passcode"))
        case 7: request = .lookUpStoreKey(storePath: try reader.path())
        case 8: request = .createStoreKey(storePath: try reader.path(), protectionClass: try reader.protectionClass())
        case 9: request = .advanceClock(try reader.duration("clock advance", atMost: maximumRequestDuration))
        case 10: request = .reboot
        case 11: request = .authenticate(passcode: try reader.secret("passcode"))
        default: throw Malformed(reason: "unknown request kind \(kind)")
        }
        try reader.end()
        return RequestFrame(id: id, request: request)
    }

    /// The reply in a frame's body (the bytes after the length prefix).
    ///
    /// - Throws: ``Malformed`` naming what is wrong.
    public static func decodeReply(_ body: UnsafeRawBufferPointer) throws(Malformed) -> ReplyFrame {
        var reader = FrameReader(bytes: body)
        let kind = try reader.u8("kind")
        let id = try reader.u32("request id")
        let reply: AgentReply
        switch kind {
        case 0x81: reply = .status(try reader.status())
        case 0x82:
            guard let domain = AgentFailure.Domain(rawValue: try reader.u8("failure domain")) else {
                throw Malformed(reason: "unknown failure domain")
            }
            reply = .failure(
                AgentFailure(
                    domain: domain, code: try reader.text("failure code"), message: try reader.text("failure message"),
                    retryAfter: try reader.optionalDuration("retry-after"), failedAttempts: try reader.optionalCount("failed attempts")))
        case 0x83:
            switch try reader.u8("store-key look-up") {
            case 0: reply = .storeKey(.absent)
            case 1: reply = .storeKey(.locked(try reader.protectionClass()))
            case 2: reply = .storeKey(.available(try reader.secret("store key")))
            case let other: throw Malformed(reason: "unknown store-key look-up \(other)")
            }
        case 0x84:
            let event: ProtectedDataEvent
            switch try reader.u8("event") {
            case 1: event = .willBecomeUnavailable
            case 2: event = .didBecomeUnavailable
            case 3: event = .didBecomeAvailable
            case let other: throw Malformed(reason: "unknown event \(other)")
            }
            reply = .event(event, try reader.status())
        default: throw Malformed(reason: "unknown reply kind \(kind)")
        }
        try reader.end()
        return ReplyFrame(id: id, reply: reply)
    }

    /// The body length a frame's 4-byte prefix announces.
    ///
    /// - Throws: ``Malformed`` for a body shorter than a kind and an id, or longer than ``maximumBodyBytes``.
    public static func bodyLength(prefix: UInt32) throws(Malformed) -> Int {
        guard prefix >= 5 else { throw Malformed(reason: "a frame of \(prefix) bytes is too short for a kind and an id") }
        guard prefix <= maximumBodyBytes else {
            throw Malformed(reason: "a frame of \(prefix) bytes is over the \(maximumBodyBytes / 1024) KiB limit")
        }
        return Int(prefix)
    }
}

// MARK: - Writer and reader

/// Writes big-endian fields into a buffer, or only counts them when there is none.
private struct FrameWriter {
    let buffer: UnsafeMutableRawBufferPointer?
    var count = 0

    mutating func bytes(_ source: UnsafeRawBufferPointer) {
        if let buffer, let base = source.baseAddress, source.count > 0 {
            (buffer.baseAddress! + count).copyMemory(from: base, byteCount: source.count)
        }
        count += source.count
    }

    mutating func u8(_ value: UInt8) { withUnsafeBytes(of: value) { bytes($0) } }
    mutating func bool(_ value: Bool) { u8(value ? 1 : 0) }
    mutating func u32(_ value: UInt32) { withUnsafeBytes(of: value.bigEndian) { bytes($0) } }
    mutating func i64(_ value: Int64) { withUnsafeBytes(of: value.bigEndian) { bytes($0) } }

    /// The kind and the request id.
    mutating func header(kind: UInt8, id: UInt32) {
        u8(kind)
        u32(id)
    }

    mutating func text(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            u32(UInt32(utf8.count))
            bytes(UnsafeRawBufferPointer(utf8))
        }
    }

    mutating func secret(_ value: SecureBytes) {
        u32(UInt32(value.count))
        // A wiped secret is sent as that many zero bytes: the receiver's check fails, nothing leaks.
        if (try? value.withUnsafeBytes({ bytes($0) })) == nil { count += value.count }
    }

    /// Milliseconds, from 0 to `Int64.max` (a negative duration is written as 0, a longer one as the most).
    mutating func duration(_ value: Duration) { i64(Self.milliseconds(value)) }
    mutating func optionalDuration(_ value: Duration?) { i64(value.map(Self.milliseconds) ?? -1) }

    private static func milliseconds(_ value: Duration) -> Int64 {
        let (seconds, attoseconds) = value.components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow else { return .max }
        return whole.addingReportingOverflow(attoseconds / 1_000_000_000_000_000).overflow ? .max : whole + attoseconds / 1_000_000_000_000_000
    }
    mutating func optionalCount(_ value: Int?) { i64(value.map { Int64(max(0, $0)) } ?? -1) }

    mutating func status(_ status: DeviceAgentStatus) {
        u32(UInt32(bitPattern: status.agentProcessID))
        switch status.lockState {
        case nil: u8(0); i64(0)
        case .beforeFirstUnlock?: u8(1); i64(0)
        case .unlocked?: u8(2); i64(0)
        case .lockedInGracePeriod(let remaining)?: u8(3); duration(remaining)
        case .locked?: u8(4); i64(0)
        case .wiped?: u8(5); i64(0)
        }
        var classes: UInt8 = 0
        for protectionClass in status.availability.availableClasses { classes |= 1 << protectionClass.rawValue }
        u8(classes)
        i64(Int64(status.failedPasscodeAttempts))
        duration(status.clock)
    }
}

/// Reads big-endian fields from a body, throwing ``AgentWireFormat/Malformed`` at the first that does not fit.
private struct FrameReader {
    typealias Malformed = AgentWireFormat.Malformed
    let bytes: UnsafeRawBufferPointer
    var offset = 0

    mutating func take(_ count: Int, _ field: String) throws(Malformed) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= bytes.count - offset else {
            throw Malformed(reason: "the \(field) runs past the end of the frame")
        }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + count])
    }

    mutating func u8(_ field: String) throws(Malformed) -> UInt8 { try take(1, field)[0] }

    mutating func bool(_ field: String) throws(Malformed) -> Bool {
        switch try u8(field) {
        case 0: return false
        case 1: return true
        case let other: throw Malformed(reason: "the \(field) is \(other), not 0 or 1")
        }
    }

    mutating func u32(_ field: String) throws(Malformed) -> UInt32 {
        try take(4, field).reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func i64(_ field: String) throws(Malformed) -> Int64 {
        Int64(bitPattern: try take(8, field).reduce(0) { $0 << 8 | UInt64($1) })
    }

    mutating func text(_ field: String) throws(Malformed) -> String {
        let length = Int(try u32(field + " length"))
        let utf8 = try take(length, field)
        guard let text = String(validating: utf8, as: UTF8.self) else { throw Malformed(reason: "the \(field) is not UTF-8") }
        return text
    }

    /// An absolute path without a NUL byte, at most `PATH_MAX` bytes.
    mutating func path() throws(Malformed) -> String {
        let path = try text("store path")
        guard path.hasPrefix("/"), !path.utf8.contains(0), path.utf8.count <= 4096 else {
            throw Malformed(reason: "the store path is not an absolute path of at most 4096 bytes")
        }
        return path
    }

    mutating func secret(_ field: String) throws(Malformed) -> SecureBytes {
        let length = Int(try u32(field + " length"))
        let bytes = try take(length, field)
        do {
            return try SecureBytes(copying: bytes)
        } catch {
            // Not the peer's fault, but the frame cannot be read: the request is refused, saying why.
            throw Malformed(reason: "the \(field) could not be kept: \(error)")
        }
    }

    mutating func duration(_ field: String, atMost limit: Duration? = nil) throws(Malformed) -> Duration {
        let milliseconds = try i64(field)
        guard milliseconds >= 0 else { throw Malformed(reason: "the \(field) is negative") }
        if let limit, milliseconds > limit.milliseconds {
            throw Malformed(reason: "the \(field) is over \(limit.milliseconds / 31_536_000_000) years")
        }
        return .milliseconds(milliseconds)
    }

    mutating func optionalDuration(_ field: String) throws(Malformed) -> Duration? {
        let milliseconds = try i64(field)
        guard milliseconds >= -1 else { throw Malformed(reason: "the \(field) is negative") }
        return milliseconds == -1 ? nil : .milliseconds(milliseconds)
    }

    mutating func optionalCount(_ field: String) throws(Malformed) -> Int? {
        let count = try i64(field)
        guard count >= -1 else { throw Malformed(reason: "the \(field) is negative") }
        return count == -1 ? nil : Int(count)
    }

    mutating func protectionClass() throws(Malformed) -> ProtectionClass {
        let raw = try u8("protection class")
        guard let protectionClass = ProtectionClass(rawValue: raw) else { throw Malformed(reason: "unknown protection class \(raw)") }
        return protectionClass
    }

    mutating func status() throws(Malformed) -> DeviceAgentStatus {
        let pid = Int32(bitPattern: try u32("agent process id"))
        let lockKind = try u8("lock state")
        let remaining = try duration("grace period left")
        guard lockKind == 3 || remaining == .zero else { throw Malformed(reason: "a grace period left for lock state \(lockKind)") }
        let lockState: KeybagDevice.LockState?
        switch lockKind {
        case 0: lockState = nil
        case 1: lockState = .beforeFirstUnlock
        case 2: lockState = .unlocked
        case 3: lockState = .lockedInGracePeriod(remaining: remaining)
        case 4: lockState = .locked
        case 5: lockState = .wiped
        default: throw Malformed(reason: "unknown lock state \(lockKind)")
        }
        let classBits = try u8("available classes")
        let classes = Set(ProtectionClass.allCases.filter { classBits & (1 << $0.rawValue) != 0 })
        guard classBits & ~classes.reduce(0, { $0 | 1 << $1.rawValue }) == 0 else {
            throw Malformed(reason: "unknown protection classes in \(classBits)")
        }
        let failures = try i64("failed attempts")
        guard failures >= 0 else { throw Malformed(reason: "the failed attempts are negative") }
        return DeviceAgentStatus(
            agentProcessID: pid, lockState: lockState, availability: ProtectedDataAvailability(availableClasses: classes),
            failedPasscodeAttempts: Int(failures), clock: try duration("device clock"))
    }

    func end() throws(Malformed) {
        guard offset == bytes.count else { throw Malformed(reason: "\(bytes.count - offset) bytes after the last field") }
    }
}
