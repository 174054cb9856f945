/// How long a device makes you wait after wrong passcodes, as iOS does.
///
/// There is nothing for the first four failures, then 1 minute after the 5th, 5 after the 6th, 15 after the 7th
/// and 8th, an hour from the 9th. Optionally the device erases itself after a number of failures ("Erase Data").
public struct PasscodeAttemptPolicy: Sendable, Hashable, Codable {
    /// After this many consecutive failures the device wipes its keys, or never when `nil`.
    public var wipeAfterFailures: Int?

    /// A policy.
    ///
    /// - Parameter wipeAfterFailures: erase the device after this many consecutive failures, or never when `nil`.
    public init(wipeAfterFailures: Int? = nil) { self.wipeAfterFailures = wipeAfterFailures }

    /// The wait imposed after `failures` consecutive wrong passcodes.
    public func delay(afterFailures failures: Int) -> Duration {
        switch failures {
        case ..<5: .zero
        case 5: .seconds(60)
        case 6: .seconds(5 * 60)
        case 7, 8: .seconds(15 * 60)
        default: .seconds(60 * 60)
        }
    }

    /// The count after one more wrong passcode.
    ///
    /// It stops at ``DeviceRules/maximumFailedAttempts`` and never traps, whatever count it is given (a negative
    /// one counts as none).
    public static func failures(afterOneMore failures: Int) -> Int {
        guard failures >= 0 else { return 1 }
        return failures >= DeviceRules.maximumFailedAttempts ? DeviceRules.maximumFailedAttempts : failures + 1
    }

    /// Whether `failures` consecutive failures erase the device.
    public func wipes(afterFailures failures: Int) -> Bool {
        wipeAfterFailures.map { failures >= $0 } ?? false
    }
}
