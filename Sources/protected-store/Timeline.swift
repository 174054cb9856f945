import ProtectedData
import ProtectedStore

/// Prints the demo's steps for a reader who has never built an iOS app, in at most ``width`` columns: the
/// virtual time and the command, what a phone would be doing and why, notes, and the state after the step.
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
    static let width = 100
    /// Where the text of a step starts: after the clock (`0:05.000`) and two spaces.
    private static let indent = String(repeating: " ", count: 10)

    /// The first line of a step: the clock and the command typed.
    func step(_ time: Duration, _ command: String) {
        for line in Self.wrap("$ " + command, first: time.clockText + "  ", rest: Self.indent + "  ") { print(line) }
    }

    /// What the step means, wrapped.
    func explain(_ text: String) {
        for line in Self.wrap(text, first: Self.indent, rest: Self.indent) { print(line) }
    }

    /// A paragraph of the introduction or the ending, from the first column, then a blank line.
    func explainParagraph(_ text: String) {
        for line in Self.wrap(text, first: "", rest: "") { print(line) }
        print("")
    }

    /// A note: something the app or the phone reported during the step.
    func note(_ text: String) {
        for line in Self.wrap(text, first: Self.indent + "↳ ", rest: Self.indent + "  ") { print(line) }
    }

    /// The state after the step, in the reader's words, then a blank line.
    func state(device: SimulatedDevice?, controller: DataController?) {
        let phone = device.map { Self.words(for: $0.lockState) } ?? "not set up"
        var parts = ["phone: \(phone)"]
        if let controller {
            parts.append("store: \(controller.phase.name)")
            parts.append("UI: \(controller.isInteractionEnabled ? "enabled" : "disabled")")
            parts.append("queued: \(controller.queuedOperationCount)")
        } else {
            parts.append("app: not running")
        }
        for line in Self.wrap(parts.joined(separator: " · "), first: Self.indent, rest: Self.indent + "  ") { print(line) }
        print("")
    }

    /// The lock state as someone holding the phone would say it.
    static func words(for state: SimulatedDevice.LockState) -> String {
        switch state {
        case .beforeFirstUnlock: "restarted, passcode not typed yet"
        case .unlocked: "unlocked"
        case .lockedInGracePeriod(let remaining): "locked, keys kept \(remaining.spoken) more"
        case .locked: "locked, keys wiped"
        case .wiped: "erased"
        }
    }

    /// `text` in lines of at most ``width`` columns, the first starting with `first`, the others with `rest`;
    /// a word longer than a line is cut.
    static func wrap(_ text: String, first: String, rest: String) -> [String] {
        var lines: [String] = []
        var line = first
        var lineIsEmpty = true
        for word in text.split(separator: " ") {
            var word = Substring(word)
            if !lineIsEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = rest
                lineIsEmpty = true
            }
            while line.count + (lineIsEmpty ? 0 : 1) + word.count > width {
                let room = width - line.count - (lineIsEmpty ? 0 : 1)
                lines.append(line + (lineIsEmpty ? "" : " ") + word.prefix(room))
                word = word.dropFirst(room)
                line = rest
                lineIsEmpty = true
            }
            line += (lineIsEmpty ? "" : " ") + word
            lineIsEmpty = false
        }
        lines.append(line)
        return lines
    }
}

extension Duration {
    /// `0:00.000`: minutes, seconds and milliseconds of virtual time.
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
