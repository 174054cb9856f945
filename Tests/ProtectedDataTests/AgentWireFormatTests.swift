import TestSupport
import Foundation
import SecureKeys
import Testing

@_spi(DeviceAgentWire) @testable import ProtectedData

/// The device agent's frames: every kind survives a round trip, and every way a body can be wrong is refused
/// with a `Malformed` whose reason names what is wrong.
@Suite("Agent wire format")
struct AgentWireFormatTests {
    typealias Malformed = AgentWireFormat.Malformed

    static let status = DeviceAgentStatus(
        agentProcessID: 4242, lockState: .lockedInGracePeriod(remaining: .milliseconds(7_500)),
        availability: ProtectedDataAvailability(availableClasses: [.completeUntilFirstUserAuthentication, .none]),
        failedPasscodeAttempts: 3, clock: .milliseconds(123_456))

    static let requests: [AgentRequest] = [
        .hello(protocolVersion: AgentWireFormat.protocolVersion, clientName: "app ✓"),
        .status,
        .setUp(passcode: try! SecureBytes(utf8: "1234"), gracePeriod: .seconds(10), wipeAfterFailures: 10),
        .setUp(passcode: try! SecureBytes(utf8: ""), gracePeriod: .zero, wipeAfterFailures: nil),
        .unlock(passcode: try! SecureBytes(utf8: "1234")),
        .lock,
        .changePasscode(old: try! SecureBytes(utf8: "1234"), new: try! SecureBytes(utf8: "5678")),
        .lookUpStoreKey(storePath: "/tmp/notes.sqlite"),
        .createStoreKey(storePath: "/tmp/notes.sqlite", protectionClass: .completeUnlessOpen),
        .advanceClock(.milliseconds(61_001)),
        .reboot,
        .authenticate(passcode: try! SecureBytes(utf8: "1234")),
    ]

    static let replies: [AgentReply] = [
        .status(status),
        .status(DeviceAgentStatus(
            agentProcessID: -1, lockState: nil, availability: ProtectedDataAvailability(availableClasses: []),
            failedPasscodeAttempts: 0, clock: .zero)),
        .status(DeviceAgentStatus(
            agentProcessID: 1, lockState: .unlocked, availability: ProtectedDataAvailability(availableClasses: Set(ProtectionClass.allCases)),
            failedPasscodeAttempts: 0, clock: .seconds(1))),
        .status(DeviceAgentStatus(
            agentProcessID: 1, lockState: .beforeFirstUnlock, availability: ProtectedDataAvailability(availableClasses: [.none]),
            failedPasscodeAttempts: 9, clock: .seconds(1))),
        .status(DeviceAgentStatus(
            agentProcessID: 1, lockState: .locked, availability: ProtectedDataAvailability(availableClasses: [.none]),
            failedPasscodeAttempts: 0, clock: .seconds(1))),
        .status(DeviceAgentStatus(
            agentProcessID: 1, lockState: .wiped, availability: ProtectedDataAvailability(availableClasses: []),
            failedPasscodeAttempts: 10, clock: .seconds(1))),
        .failure(AgentFailure(
            domain: .device, code: "wrong-passcode", message: "wrong passcode (5 failed attempts)", retryAfter: .seconds(60),
            failedAttempts: 5)),
        .failure(AgentFailure(domain: .secureKeys, code: "io-error", message: "cannot read")),
        .storeKey(.absent),
        .storeKey(.locked(.complete)),
        .storeKey(.available(try! SecureBytes.random(count: 32))),
        .event(.willBecomeUnavailable, status),
        .event(.didBecomeUnavailable, status),
        .event(.didBecomeAvailable, status),
    ]

    @Test("every request kind decodes to the request it was encoded from, with its id", arguments: requests)
    func requestRoundTrip(_ request: AgentRequest) throws {
        let frame = try decodeRequest(body(of: try AgentWireFormat.encode(request, id: 0xDEAD_BEEF)))
        #expect(frame.id == 0xDEAD_BEEF)
        #expect(frame.request == request, "\(request) came back as \(frame.request)")
    }

    @Test("every reply kind decodes to the reply it was encoded from, with its id", arguments: replies)
    func replyRoundTrip(_ reply: AgentReply) throws {
        let frame = try decodeReply(body(of: try AgentWireFormat.encode(reply, id: 7)))
        #expect(frame.id == 7)
        #expect(frame.reply == reply, "\(reply) came back as \(frame.reply)")
    }

    @Test("the length prefix announces the body, big-endian")
    func lengthPrefix() throws {
        let frame = try AgentWireFormat.encode(.status, id: 1).withUnsafeBytes { Array($0) }
        #expect(frame == [0, 0, 0, 5, 2, 0, 0, 0, 1])
    }

    // MARK: Malformed bodies

    @Test("an unknown request or reply kind is malformed")
    func unknownKind() {
        #expect(reason { try decodeRequest([99, 0, 0, 0, 1]) } == "unknown request kind 99")
        #expect(reason { try decodeRequest([0x81, 0, 0, 0, 1]) } == "unknown request kind 129")
        #expect(reason { try decodeReply([1, 0, 0, 0, 1]) } == "unknown reply kind 1")
        #expect(reason { try decodeReply(event: 9) } == "unknown event 9")
        #expect(reason { try decodeReply([0x83, 0, 0, 0, 1, 3]) } == "unknown store-key look-up 3")
        #expect(reason { try decodeReply([0x82, 0, 0, 0, 1, 3]) } == "unknown failure domain")
    }

    @Test("a field that runs past the end of the body is malformed, and names the field")
    func truncatedField() throws {
        #expect(reason { try decodeRequest([]) } == "the kind runs past the end of the frame")
        #expect(reason { try decodeRequest([2, 0, 0]) } == "the request id runs past the end of the frame")
        let unlock = body(of: try AgentWireFormat.encode(.unlock(passcode: try SecureBytes(utf8: "123456")), id: 1))
        #expect(reason { try decodeRequest(Array(unlock.dropLast())) } == "the passcode runs past the end of the frame")
        #expect(reason { try decodeRequest(Array(unlock.prefix(7))) } == "the passcode length runs past the end of the frame")
        // A length near 4 GiB is refused, not allocated.
        #expect(reason { try decodeRequest([4, 0, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0]) } == "the passcode runs past the end of the frame")
        let status = body(of: try AgentWireFormat.encode(.status(Self.status), id: 1))
        #expect(reason { try decodeReply(Array(status.dropLast())) } == "the device clock runs past the end of the frame")
    }

    @Test("bytes after the last field are malformed")
    func bytesLeftOver() throws {
        #expect(reason { try decodeRequest([2, 0, 0, 0, 1, 0]) } == "1 bytes after the last field")
        let lock = body(of: try AgentWireFormat.encode(.storeKey(.locked(.none)), id: 1))
        #expect(reason { try decodeReply(lock + [0, 0]) } == "2 bytes after the last field")
    }

    @Test("text that is not UTF-8 is malformed")
    func nonUTF8Text() throws {
        #expect(
            reason { try decodeRequest([1, 0, 0, 0, 1] + u32(1) + u32(2) + [0xC3, 0x28]) } == "the client name is not UTF-8")
        #expect(reason { try decodeRequest([7, 0, 0, 0, 1] + u32(2) + [0x2F, 0xFF]) } == "the store path is not UTF-8")
        let failure = [0x82, 0, 0, 0, 0, 1] + u32(1) + [0x80] + u32(0) + i64(-1) + i64(-1)
        #expect(reason { try decodeReply(failure) } == "the failure code is not UTF-8")
    }

    @Test("a store path that is relative, holds a NUL or is over 4096 bytes is malformed")
    func relativeStorePath() throws {
        let expected = "the store path is not an absolute path of at most 4096 bytes"
        for path in ["notes.sqlite", "", "./notes.sqlite", "/tmp/a\u{0}b", "/" + String(repeating: "a", count: 4096)] {
            let lookUp = body(of: try AgentWireFormat.encode(.lookUpStoreKey(storePath: path), id: 1))
            #expect(reason { try decodeRequest(lookUp) } == expected, "\(path.debugDescription)")
            let create = body(of: try AgentWireFormat.encode(.createStoreKey(storePath: path, protectionClass: .none), id: 1))
            #expect(reason { try decodeRequest(create) } == expected, "\(path.debugDescription)")
        }
        let longest = "/" + String(repeating: "a", count: 4095)
        #expect(throws: Never.self) { try decodeRequest(body(of: try AgentWireFormat.encode(.lookUpStoreKey(storePath: longest), id: 1))) }
    }

    @Test("an unknown protection class is malformed")
    func unknownProtectionClass() throws {
        var create = body(of: try AgentWireFormat.encode(.createStoreKey(storePath: "/s", protectionClass: .none), id: 1))
        for raw: UInt8 in [0, 5, 255] {
            create[create.count - 1] = raw
            #expect(reason { try decodeRequest(create) } == "unknown protection class \(raw)")
        }
        #expect(reason { try decodeReply([0x83, 0, 0, 0, 1, 1, 0]) } == "unknown protection class 0")
        var status = body(of: try AgentWireFormat.encode(.status(Self.status), id: 1))
        status[5 + 4 + 1 + 8] = 0b0010_0000  // the available-classes bit set: only bits 1…4 are classes
        #expect(reason { try decodeReply(status) } == "unknown protection classes in 32")
    }

    @Test("a negative duration or count is malformed; -1 is the only 'none'")
    func negativeDuration() throws {
        #expect(reason { try decodeRequest([9, 0, 0, 0, 1] + i64(-1)) } == "the clock advance is negative")
        #expect(reason { try decodeRequest([9, 0, 0, 0, 1] + i64(.min)) } == "the clock advance is negative")
        let setUp = [3, 0, 0, 0, 1] + u32(1) + [0x31]
        #expect(reason { try decodeRequest(setUp + i64(-5) + i64(-1)) } == "the grace period is negative")
        #expect(reason { try decodeRequest(setUp + i64(0) + i64(-2)) } == "the wipe-after is negative")
        let failure = [0x82, 0, 0, 0, 0, 1] + u32(0) + u32(0)
        #expect(reason { try decodeReply(failure + i64(-2) + i64(-1)) } == "the retry-after is negative")
        #expect(reason { try decodeReply(failure + i64(-1) + i64(-2)) } == "the failed attempts is negative")
        var status = body(of: try AgentWireFormat.encode(.status(Self.status), id: 1))
        status.replaceSubrange(status.count - 8..<status.count, with: i64(-1))
        #expect(reason { try decodeReply(status) } == "the device clock is negative")
    }

    @Test("a clock advance or a grace period over 100 years is malformed; 100 years is not")
    func durationOverOneHundredYears() throws {
        let limit = AgentWireFormat.maximumRequestDuration.components.seconds * 1000
        #expect(reason { try decodeRequest([9, 0, 0, 0, 1] + i64(limit + 1)) } == "the clock advance is over 100 years")
        #expect(reason { try decodeRequest([9, 0, 0, 0, 1] + i64(.max)) } == "the clock advance is over 100 years")
        let setUp = [3, 0, 0, 0, 1] + u32(1) + [0x31]
        #expect(reason { try decodeRequest(setUp + i64(limit + 1) + i64(-1)) } == "the grace period is over 100 years")
        guard case .advanceClock(let advance) = try decodeRequest([9, 0, 0, 0, 1] + i64(limit)).request else {
            Issue.record("100 years did not decode as a clock advance")
            return
        }
        #expect(advance == AgentWireFormat.maximumRequestDuration)
        // A longer duration is still encoded (saturated, never trapping): the receiver refuses it.
        let huge = body(of: try AgentWireFormat.encode(.advanceClock(.seconds(Int64.max)), id: 1))
        #expect(Array(huge.suffix(8)) == i64(.max))
    }

    @Test("a grace period left beside any lock state but locked-in-grace-period is malformed: one encoding per status")
    func graceLeftOutsideGracePeriod() throws {
        var status = body(of: try AgentWireFormat.encode(.status(Self.status), id: 1))
        #expect(status[9] == 3)  // locked in grace period, 7.5 s left
        for kind: UInt8 in [0, 1, 2, 4, 5] {
            status[9] = kind
            #expect(reason { try decodeReply(status) } == "a grace period left for lock state \(kind)")
        }
        // The input the fuzzer found: no device (lock state 0) with 1,792,024 ms of grace left.
        let found = [UInt8](hex: "8100000000001092030000000000001b5818000000000000006003000000000001e230")
        #expect(reason { try decodeReply(found) } == "a grace period left for lock state 0")
    }

    @Test("a length prefix of 0 or 4 is too short for a kind and an id; over 64 KiB is over the limit")
    func lengthPrefixBounds() throws {
        #expect(prefixReason(0) == "a frame of 0 bytes is too short for a kind and an id")
        #expect(prefixReason(4) == "a frame of 4 bytes is too short for a kind and an id")
        #expect(prefixReason(65_537) == "a frame of 65537 bytes is over the 64 KiB limit")
        #expect(prefixReason(.max) == "a frame of 4294967295 bytes is over the 64 KiB limit")
        #expect(try AgentWireFormat.bodyLength(prefix: 5) == 5)
        #expect(try AgentWireFormat.bodyLength(prefix: 65_536) == 65_536)
    }

    // MARK: Helpers

    func body(of frame: SecureBytes) -> [UInt8] {
        try! frame.withUnsafeBytes { bytes in
            let announced = bytes.prefix(4).reduce(0) { $0 << 8 | Int($1) }
            precondition(announced == bytes.count - 4)
            return Array(bytes.dropFirst(4))
        }
    }

    func decodeRequest(_ body: [UInt8]) throws -> AgentWireFormat.RequestFrame {
        try body.withUnsafeBytes { try AgentWireFormat.decodeRequest($0) }
    }

    func decodeReply(_ body: [UInt8]) throws -> AgentWireFormat.ReplyFrame {
        try body.withUnsafeBytes { try AgentWireFormat.decodeReply($0) }
    }

    func decodeReply(event: UInt8) throws -> AgentWireFormat.ReplyFrame {
        var frame = body(of: try AgentWireFormat.encode(.event(.didBecomeAvailable, Self.status), id: 0))
        frame[5] = event
        return try decodeReply(frame)
    }

    /// The reason of the `Malformed` that `body` throws; `nil` when it throws nothing (or something else).
    func reason(_ body: () throws -> Any) -> String? {
        let error = #expect(throws: Malformed.self) { _ = try body() }
        return error?.reason
    }

    func prefixReason(_ prefix: UInt32) -> String? {
        let error = #expect(throws: Malformed.self) { _ = try AgentWireFormat.bodyLength(prefix: prefix) }
        return error?.reason
    }

    func u32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    func i64(_ value: Int64) -> [UInt8] { withUnsafeBytes(of: value.bigEndian) { Array($0) } }
}

