import Foundation
import Glibc

/// How wide the tool's output may be, and lines wrapped to it at spaces.
///
/// The width is `COLUMNS` when it is set to a number (as a shell sets it, or as a user does for a file:
/// `COLUMNS=80 protected-store demo > demo.txt`), else the terminal's own width when standard output is one,
/// else nothing is known: the demo then takes its default, and `run` and `simulate` print each line whole,
/// as the scripts that read them expect (`scripts/simulate-long.sh` sums fields of one line).
enum OutputWidth {
    /// The narrowest width honoured.
    ///
    /// Below it, a line could not hold an indentation and a word.
    static let minimum = 40

    /// The width the output should fit, or `nil` when neither `COLUMNS` nor a terminal says.
    ///
    /// - Parameter environment: the process's environment, for `COLUMNS`.
    static func current(environment: [String: String] = ProcessInfo.processInfo.environment) -> Int? {
        if let text = environment["COLUMNS"], let columns = Int(text.trimmingCharacters(in: .whitespaces)), columns > 0 {
            return max(columns, minimum)
        }
        guard isatty(STDOUT_FILENO) == 1 else { return nil }
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
        return max(Int(size.ws_col), minimum)
    }

    /// `text` in lines of at most `width` columns (one a character).
    ///
    /// The first starts with `first`, the others with `rest`. Words are never split: one longer than a whole line (a
    /// path) has a line of its own, past the width. Spaces at the start of `text` are kept (after `first`). A `nil`
    /// width gives one line.
    static func wrap(_ text: String, width: Int?, first: String = "", rest: String = "") -> [String] {
        let leading = String(text.prefix { $0 == " " })
        guard let width else { return [first + text] }
        var lines: [String] = []
        var line = first + leading
        var lineIsEmpty = true
        for word in text.split(separator: " ") {
            if !lineIsEmpty && line.count + 1 + word.count > width {
                lines.append(line)
                line = rest
                lineIsEmpty = true
            }
            // A word longer than a whole line (a path) stays whole on a line of its own, past the width: split,
            // it could no longer be copied or searched for.
            line += (lineIsEmpty ? "" : " ") + word
            lineIsEmpty = false
        }
        lines.append(line)
        return lines
    }

    /// Prints `text` wrapped to the current width.
    ///
    /// Continuation lines are indented four spaces more than the text's own first line.
    static func print(_ text: String, width: Int?) {
        let leading = String(text.prefix { $0 == " " })
        for line in wrap(text, width: width, rest: leading + "    ") { Swift.print(line) }
    }
}
