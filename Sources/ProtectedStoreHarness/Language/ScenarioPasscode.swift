public import SecureKeys

/// A passcode a command carries, in guarded memory (`SecureBytes`) from the moment the line is parsed or the
/// prompt reads it until the command is released, when it is zeroed.
///
/// Never a Swift `String`: a freed string's storage keeps its bytes in the heap, so a shell that had read
/// `device unlock --passcode P` would keep `P` in its memory after the device locked.
/// Equal when the bytes are equal, compared in constant time; ``description`` is redacted.
///
/// A literal (`.deviceUnlock(passcode: "1234")`) and ``init(_:)`` make one from text, for the simulator's and
/// the tests' own passcodes, which are no secrets.
public struct ScenarioPasscode: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The passcode's UTF-8 bytes.
    public let bytes: SecureBytes

    /// Takes `bytes` as they are, not copied.
    ///
    /// They are the passcode's from now on.
    public init(bytes: SecureBytes) {
        self.bytes = bytes
    }

    /// The UTF-8 bytes of `text`, copied into guarded memory. The string itself stays the caller's.
    ///
    /// - Throws: `SecureKeysError` with `out-of-memory` when the guarded memory cannot be allocated.
    public init(_ text: String) throws {
        bytes = try SecureBytes(utf8: text)
    }

    /// The UTF-8 bytes of `value`, copied into guarded memory.
    ///
    /// This is for the program's own constant passcodes (the simulator's, the tests'), made once. A literal cannot
    /// throw, so a process that has no guarded memory left for a few bytes of its own constants stops here, saying
    /// so; a passcode typed or read from a script goes through ``init(bytes:)`` and its callers' `out-of-memory`
    /// instead.
    public init(stringLiteral value: String) {
        do {
            try self.init(value)
        } catch {
            fatalError("a constant passcode: \(error)")
        }
    }

    /// Whether the passcode is empty (no bytes).
    public var isEmpty: Bool { bytes.count == 0 }

    /// The passcode as text, for what must write it out.
    ///
    /// That is a script line (``ScenarioCommand/scriptLine``) and the simulator's model, whose passcodes are its own.
    /// The shell never calls it.
    package var text: String {
        (try? bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }) ?? ""
    }

    /// Equal bytes, compared in constant time.
    public static func == (lhs: ScenarioPasscode, rhs: ScenarioPasscode) -> Bool {
        lhs.bytes === rhs.bytes || lhs.bytes.constantTimeEquals(rhs.bytes)
    }

    /// Hashes the length only.
    ///
    /// Equal passcodes have equal lengths, and a hash of the bytes would be a copy of them.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.count)
    }

    /// Only how long the passcode is, never the passcode.
    public var description: String { "ScenarioPasscode(\(bytes.count) bytes, redacted)" }
}
