public import SecureKeys

/// The one set of rules a device's settings and passcodes obey, whoever asks.
///
/// The command line and the scenario parser check them early to name the option. ``KeybagDevice`` checks them
/// again at set-up and at a passcode change, so a device agent's client, or a library caller, cannot get past
/// them. The device state file is range-checked against the same limits when it is read.
public enum DeviceRules: Sendable {
    /// The longest grace period, 100 years.
    ///
    /// Longer would bring the device's clock near the end of `Duration`'s milliseconds. No phone keeps keys that
    /// long after a lock.
    public static let maximumGracePeriod = Duration.seconds(100 * 365 * 24 * 3600)
    /// The largest wrong-passcode count a device records, and so the largest `wipe-after`.
    ///
    /// It is one million. The counter stops there (an hour's delay per attempt from the 9th on makes it a century
    /// away), so no count read from disk or kept in memory can overflow.
    public static let maximumFailedAttempts = 1_000_000
    /// The longest single step of a virtual clock.
    ///
    /// It is 100 years, the longest grace period.
    public static let maximumClockStep = maximumGracePeriod
    /// Where a virtual clock stops, 1,000 years after boot.
    ///
    /// That is far from where its milliseconds would overflow.
    public static let clockLimit = Duration.seconds(1000 * 365 * 24 * 3600)
    /// The `wipe-after` values a device accepts.
    ///
    /// A device erases after 1 to ``maximumFailedAttempts`` wrong passcodes.
    public static let wipeAfterFailures: ClosedRange<Int> = 1...maximumFailedAttempts

    /// Checks a new passcode.
    ///
    /// - Parameters:
    ///   - passcode: the passcode a device is set up with or changed to.
    ///   - allowsEmpty: whether an empty passcode was asked for explicitly (`--allow-empty-passcode`).
    /// - Throws: `DeviceError.Code.invalidDeviceSetting` for an empty passcode not asked for: a device anyone
    ///   unlocks without a passcode is almost always a mistake (an empty `--passcode ""`, or Return pressed at
    ///   a prompt).
    public static func checkNewPasscode(_ passcode: SecureBytes, allowsEmpty: Bool) throws(DeviceError) {
        if passcode.count == 0 && !allowsEmpty {
            throw DeviceError.invalidSetting(
                "an empty passcode is refused (anyone could unlock the device); allow it explicitly (--allow-empty-passcode) if that is what you want")
        }
    }

    /// Checks a grace period, which runs from zero to ``maximumGracePeriod``.
    ///
    /// - Throws: `DeviceError.Code.invalidDeviceSetting` naming the value.
    public static func checkGracePeriod(_ gracePeriod: Duration) throws(DeviceError) {
        guard gracePeriod >= .zero, gracePeriod <= maximumGracePeriod else {
            throw DeviceError.invalidSetting("a grace period of \(gracePeriod.spoken) is outside 0s…100 years")
        }
    }

    /// Checks a `wipe-after` count.
    ///
    /// It is `nil` (never erase) or within ``wipeAfterFailures``.
    ///
    /// - Throws: `DeviceError.Code.invalidDeviceSetting` naming the value.
    public static func checkWipeAfterFailures(_ count: Int?) throws(DeviceError) {
        guard let count else { return }
        guard wipeAfterFailures.contains(count) else {
            throw DeviceError.invalidSetting(
                "wipe-after \(count) is outside \(wipeAfterFailures.lowerBound)…\(wipeAfterFailures.upperBound) wrong passcodes")
        }
    }

    /// Checks a step of a virtual clock (`clock advance`) before it is taken.
    ///
    /// The step is from zero to ``maximumClockStep``, and never past ``clockLimit``. The device agent and a
    /// session's own device apply the same rule, so a script behaves the same with and without an agent.
    ///
    /// - Parameters:
    ///   - step: how far the clock would move.
    ///   - now: where the clock is, from its start.
    /// - Throws: `DeviceError.Code.clockLimit` naming the step and where the clock stays.
    public static func checkClockAdvance(by step: Duration, from now: Duration) throws(DeviceError) {
        guard step >= .zero, step <= maximumClockStep else {
            throw DeviceError.clockLimit(
                "a clock advance of \(step.spoken) is \(step < .zero ? "negative" : "over 100 years"); the clock stays at \(now.spoken)")
        }
        guard now + step <= clockLimit else {
            throw DeviceError.clockLimit("the device clock would pass 1,000 years; it stays at \(now.spoken)")
        }
    }

    /// Checks every setting of a configuration.
    ///
    /// - Throws: `DeviceError.Code.invalidDeviceSetting` naming the first that is out of range.
    public static func check(_ configuration: KeybagDevice.Configuration) throws(DeviceError) {
        try checkGracePeriod(configuration.gracePeriod)
        try checkWipeAfterFailures(configuration.attemptPolicy.wipeAfterFailures)
    }
}
