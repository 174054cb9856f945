import FuzzDriver
import Glibc
@_spi(DeviceAgentWire) import ProtectedData
import SecureKeys

// Any bytes as the body of a device-agent frame, read both as a request (what the agent parses from every
// client) and as a reply (what a client parses from the agent): decoding succeeds or throws `Malformed`.
// A frame that decodes must survive a round trip: re-encoded (the 4-byte length prefix stripped) it is the
// input byte for byte — the format has one encoding per frame — and it decodes again to an equal frame.
// The first 4 bytes also go through `bodyLength(prefix:)`, which must agree with `maximumBodyBytes`.

/// The body of an encoded frame: the bytes after the length prefix, which must announce their count.
func body(of frame: SecureBytes) -> [UInt8] {
    try! frame.withUnsafeBytes { bytes in
        let announced = bytes.prefix(4).reduce(0) { $0 << 8 | Int($1) }
        precondition(announced == bytes.count - 4, "the length prefix says \(announced), the body is \(bytes.count - 4) bytes")
        return Array(bytes.dropFirst(4))
    }
}

func checkRequest(_ input: [UInt8]) {
    guard let frame = try? input.withUnsafeBytes({ try AgentWireFormat.decodeRequest($0) }) else { return }
    let encoded = body(of: try! AgentWireFormat.encode(frame.request, id: frame.id))
    guard encoded == input else { fatalError("request re-encoded differently: \(hex(input)) became \(hex(encoded))") }
    let again = try! encoded.withUnsafeBytes { try AgentWireFormat.decodeRequest($0) }
    guard again.id == frame.id, again.request == frame.request else { fatalError("request decoded differently: \(hex(input))") }
    guard body(of: try! AgentWireFormat.encode(again.request, id: again.id)) == encoded else { fatalError("request unstable: \(hex(input))") }
}

func checkReply(_ input: [UInt8]) {
    guard let frame = try? input.withUnsafeBytes({ try AgentWireFormat.decodeReply($0) }) else { return }
    let encoded = body(of: try! AgentWireFormat.encode(frame.reply, id: frame.id))
    guard encoded == input else { fatalError("reply re-encoded differently: \(hex(input)) became \(hex(encoded))") }
    let again = try! encoded.withUnsafeBytes { try AgentWireFormat.decodeReply($0) }
    guard again.id == frame.id, again.reply == frame.reply else { fatalError("reply decoded differently: \(hex(input))") }
    guard body(of: try! AgentWireFormat.encode(again.reply, id: again.id)) == encoded else { fatalError("reply unstable: \(hex(input))") }
}

func checkPrefix(_ input: [UInt8]) {
    guard input.count >= 4 else { return }
    let prefix = input.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    let length = try? AgentWireFormat.bodyLength(prefix: prefix)
    let inBounds = prefix >= 5 && prefix <= AgentWireFormat.maximumBodyBytes
    guard (length != nil) == inBounds, length.map({ $0 == Int(prefix) }) ?? true else {
        fatalError("bodyLength(prefix: \(prefix)) gave \(String(describing: length))")
    }
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(($0 >> 4) & 0xf, radix: 16) + String($0 & 0xf, radix: 16) }.joined() }

// Seeds: a frame of every request and reply kind, so the fuzzer starts past the kind byte of each.
let status = DeviceAgentStatus(
    agentProcessID: 4242, lockState: .lockedInGracePeriod(remaining: .seconds(7)),
    availability: ProtectedDataAvailability(availableClasses: [.completeUntilFirstUserAuthentication, .none]),
    failedPasscodeAttempts: 3, clock: .milliseconds(123_456))
let requests: [AgentRequest] = try! [
    .hello(protocolVersion: AgentWireFormat.protocolVersion, clientName: "app"),
    .status,
    .setUp(passcode: SecureBytes(utf8: "1234"), gracePeriod: .seconds(10), wipeAfterFailures: 10),
    .setUp(passcode: SecureBytes(utf8: ""), gracePeriod: .zero, wipeAfterFailures: nil),
    .unlock(passcode: SecureBytes(utf8: "1234")),
    .lock,
    .changePasscode(old: SecureBytes(utf8: "1234"), new: SecureBytes(utf8: "5678")),
    .lookUpStoreKey(storePath: "/tmp/notes.sqlite"),
    .createStoreKey(storePath: "/tmp/notes.sqlite", protectionClass: .completeUnlessOpen),
    .advanceClock(.seconds(60)),
    .reboot,
    .authenticate(passcode: SecureBytes(utf8: "1234")),
]
let replies: [AgentReply] = try! [
    .status(status),
    .status(DeviceAgentStatus(agentProcessID: 1, lockState: nil, availability: ProtectedDataAvailability(availableClasses: []), failedPasscodeAttempts: 0, clock: .zero)),
    .failure(AgentFailure(domain: .device, code: "wrong-passcode", message: "wrong passcode (5 failed attempts)", retryAfter: .seconds(60), failedAttempts: 5)),
    .failure(AgentFailure(domain: .secureKeys, code: "io-error", message: "cannot read")),
    .storeKey(.absent),
    .storeKey(.locked(.complete)),
    .storeKey(.available(SecureBytes.random(count: 32, using: SeededRandom(seed: 3)))),
    .event(.willBecomeUnavailable, status),
    .event(.didBecomeUnavailable, status),
    .event(.didBecomeAvailable, status),
]
plantSeeds(
    requests.enumerated().map { body(of: try! AgentWireFormat.encode($1, id: UInt32($0 + 1))) }
        + replies.enumerated().map { body(of: try! AgentWireFormat.encode($1, id: UInt32($0))) })

exit(runFuzzer { data, count in
    let input = fuzzInput(data, count)
    checkRequest(input)
    checkReply(input)
    checkPrefix(input)
    return 0
})
