/// Where a session lock event came from.
public enum SessionLockSignal: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// systemd-logind's `LockedHint` property of the session, re-read from logind at each `PropertiesChanged`.
    case lockedHint = "logind LockedHint"
    /// `LockedHint` could not be read back from logind after a change was announced.
    ///
    /// Logind went away. This is taken as a lock, since locks can no longer be seen.
    case lockedHintUnreadable = "logind LockedHint unreadable"
    /// systemd-logind left the bus.
    ///
    /// Its name `org.freedesktop.login1` lost its owner. This is taken as a lock, since locks can no longer be seen
    /// until it is back and the session's state is read afresh.
    case logindGone = "logind left the bus"
    /// systemd-logind came back on the bus.
    ///
    /// Its name has a new owner. The session's `LockedHint` is read afresh from it: a lock when it is locked, an
    /// unlock report when it is not.
    case logindReturned = "logind returned, LockedHint read afresh"
    /// systemd-logind's `Lock` / `Unlock` signal on the session (`loginctl lock-session`).
    case sessionSignal = "logind Lock/Unlock signal"
    /// GNOME Shell's `org.gnome.ScreenSaver` `ActiveChanged` on the session bus.
    case gnomeScreenSaver = "org.gnome.ScreenSaver ActiveChanged"
    /// The freedesktop `org.freedesktop.ScreenSaver` `ActiveChanged` on the session bus (KDE, xfce, some
    /// wlroots lockers).
    case freedesktopScreenSaver = "org.freedesktop.ScreenSaver ActiveChanged"

    /// The raw value.
    public var description: String { rawValue }
}

/// What a ``SessionLockSource`` saw happen to the user's session.
///
/// Only some events take keys away (``takesKeysAway``): a lock, sleep, or the loss of the bus. None ever gives
/// them back: an *unlocked* report is for a UI to offer the passcode prompt, never an authorization — the keys
/// come back only with the passcode (``SessionDevice/unlock(passcode:)``).
public enum SessionLockEvent: Sendable, Hashable, CustomStringConvertible {
    /// The session's screen was locked.
    case locked(SessionLockSignal)
    /// The session says it was unlocked.
    ///
    /// It is reported only; the device stays locked until its passcode is given.
    case unlocked(SessionLockSignal)
    /// The machine is about to suspend or hibernate.
    ///
    /// This is logind's `PrepareForSleep(true)`. It counts as a lock.
    case sleeping
    /// The machine woke.
    ///
    /// This is logind's `PrepareForSleep(false)`. It is reported only.
    case resumed
    /// The connection to a bus was lost (its daemon went away).
    ///
    /// Its locks can no longer be seen, so a lost system bus counts as a lock. The argument names the bus.
    case busLost(String)

    /// Whether the event locks the device.
    ///
    /// A lock, sleep, or the system bus lost does.
    public var takesKeysAway: Bool {
        switch self {
        case .locked, .sleeping, .busLost: true
        case .unlocked, .resumed: false
        }
    }

    /// `locked (logind LockedHint)`, `unlocked (… ; not an authorization: the passcode is needed)`, …
    public var description: String {
        switch self {
        case .locked(let signal): "locked (\(signal))"
        case .unlocked(let signal): "unlocked (\(signal); reported only: the passcode brings the keys back)"
        case .sleeping: "sleeping (logind PrepareForSleep true)"
        case .resumed: "resumed (logind PrepareForSleep false; reported only)"
        case .busLost(let bus): "lost the \(bus): locks can no longer be seen"
        }
    }
}
