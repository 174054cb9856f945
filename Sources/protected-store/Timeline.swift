import ProtectedData
import ProtectedStore

/// Prints the demo's steps for a reader who has never built an iOS app.
///
/// It prints, in at most ``width`` columns, the virtual time and the command, what a phone would be doing and why,
/// notes, and the state after the step. Words are never split at a width of 80 columns or more.
///
/// ```
/// 0:05.000  $ app launch --background --reason location
///           A location update wakes the app in the background. …
///           ↳ inbox: merged 1 record
///           phone: restarted, passcode not typed yet · store: waiting · UI: disabled · queued: 0
/// ```
@MainActor
struct Timeline {
    /// The widest line printed, in columns.
    ///
    /// It is the output's width (``OutputWidth``), at most ``maximumWidth``.
    let width: Int
    /// The width without `COLUMNS` or a terminal, and the widest the demo gets.
    ///
    /// Longer lines read badly.
    static let maximumWidth = 100

    init(width: Int? = OutputWidth.current()) {
        self.width = min(width ?? Self.maximumWidth, Self.maximumWidth)
    }
    /// Where the text of a step starts, after the clock (`0:05.000`) and two spaces.
    private static let indent = String(repeating: " ", count: 10)

    /// The first line of a step, with the clock and the command typed.
    func step(_ time: Duration, _ command: String) {
        for line in wrap("$ " + command, first: time.clockText + "  ", rest: Self.indent + "  ") { print(line) }
    }

    /// What the step means, wrapped.
    func explain(_ text: String) {
        for line in wrap(text, first: Self.indent, rest: Self.indent) { print(line) }
    }

    /// A paragraph of the introduction or the ending, from the first column, then a blank line.
    func explainParagraph(_ text: String) {
        for line in wrap(text, first: "", rest: "") { print(line) }
        print("")
    }

    /// A note, something the app or the phone reported during the step.
    func note(_ text: String) {
        for line in wrap(text, first: Self.indent + "↳ ", rest: Self.indent + "  ") { print(line) }
    }

    /// The state after the step, in the reader's words, then a blank line.
    func state(device: KeybagDevice?, controller: DataController?) {
        let phone = device.map { Self.words(for: $0.lockState) } ?? "not set up"
        var parts = ["phone: \(phone)"]
        if let controller {
            parts.append("store: \(controller.phase.name)")
            parts.append("UI: \(controller.isInteractionEnabled ? "enabled" : "disabled")")
            parts.append("queued: \(controller.queuedOperationCount)")
        } else {
            parts.append("app: not running")
        }
        for line in wrap(parts.joined(separator: " · "), first: Self.indent, rest: Self.indent + "  ") { print(line) }
        print("")
    }

    /// The lock state as someone holding the phone would say it.
    static func words(for state: KeybagDevice.LockState) -> String {
        switch state {
        case .beforeFirstUnlock: "restarted, passcode not typed yet"
        case .unlocked: "unlocked"
        case .lockedInGracePeriod(let remaining): "locked, keys kept \(remaining.spoken) more"
        case .locked: "locked, keys wiped"
        case .wiped: "erased"
        }
    }

    /// `text` in lines of at most ``width`` columns.
    ///
    /// The first line starts with `first`, the others with `rest`; a word longer than a line is cut.
    func wrap(_ text: String, first: String, rest: String) -> [String] {
        OutputWidth.wrap(text, width: width, first: first, rest: rest)
    }
}

extension Duration {
    /// The virtual time as `0:00.000`, in minutes, seconds and milliseconds.
    var clockText: String {
        let milliseconds = components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
        let minutes = milliseconds / 60_000
        let seconds = (milliseconds % 60_000) / 1000
        let rest = milliseconds % 1000
        return "\(minutes):" + (seconds < 10 ? "0" : "") + "\(seconds)." + String(String(rest + 1000).dropFirst())
    }

    /// `10s`, `1.5s`, `999ms`.
    fileprivate var spoken: String {
        let milliseconds = components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
        if milliseconds < 1000 { return "\(milliseconds)ms" }
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000)s" }
        return "\(Double(milliseconds) / 1000)s"
    }
}
