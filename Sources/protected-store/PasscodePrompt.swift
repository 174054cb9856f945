import ProtectedStoreHarness
import SecureKeys
import Glibc

/// Asks for passcodes at the terminal with echo off (termios), so a passcode is never shown, nor left in the
/// terminal's scrollback. What is typed stays in guarded memory (``ScenarioPasscode``), never in a string.
@MainActor
struct PasscodePrompt {
    /// Where the typed lines come from, the shell's own input.
    let input: StandardInput

    /// Why no passcode came back.
    ///
    /// It is end of input (Ctrl-D), two entries that differ, or an empty passcode.
    struct Refusal: Error, CustomStringConvertible {
        /// What happened and what was not done, in words.
        let description: String
    }

    /// Asks once, for a passcode that already exists (to unlock, or the current one to change it).
    ///
    /// - Parameters:
    ///   - label: what is asked for (`passcode`, `current passcode`).
    ///   - command: the command that asks (`device unlock`), named if it is cancelled.
    /// - Throws: ``Refusal`` at the end of input.
    func existing(_ label: String, for command: String) throws(Refusal) -> ScenarioPasscode {
        guard let passcode = try ask(label, for: command) else { throw Self.cancelled(command) }
        return ScenarioPasscode(bytes: passcode)
    }

    /// Asks twice for a new passcode, as a phone does, and refuses an empty one unless it was asked for.
    ///
    /// - Parameters:
    ///   - command: the command that asks (`device setup`, `device change-passcode`), named in refusals.
    ///   - allowEmpty: whether `--allow-empty-passcode` was given.
    /// - Throws: ``Refusal`` at the end of input, when the two entries differ, or for an empty passcode.
    func new(for command: String, allowEmpty: Bool) throws(Refusal) -> ScenarioPasscode {
        guard let first = try ask("new passcode", for: command) else { throw Self.cancelled(command) }
        if first.count == 0, !allowEmpty {
            throw Refusal(
                description: "\(command): an empty passcode is refused (anyone could unlock the device); "
                    + "type `\(command) --allow-empty-passcode` if that is what you want. \(Self.consequence(command))")
        }
        let second: SecureBytes?
        do {
            second = try ask("new passcode again", for: command)
        } catch {
            first.wipe()
            throw error
        }
        guard let second else {
            first.wipe()
            throw Self.cancelled(command)
        }
        defer { second.wipe() }
        guard first.constantTimeEquals(second) else {
            first.wipe()
            throw Refusal(description: "\(command): the two passcodes differ. \(Self.consequence(command))")
        }
        return ScenarioPasscode(bytes: first)
    }

    /// Turns echo off, prints `label: `, reads one line, and moves to the next line (the Return typed was not
    /// echoed either).
    ///
    /// Echo goes off before the prompt is shown, discarding what was typed ahead (`TCSAFLUSH`: it was typed
    /// with echo on, so it may be on the screen already); what is typed once the prompt shows is kept.
    ///
    /// - Throws: ``Refusal`` naming `command` and `out-of-memory` when there is no guarded memory for the line.
    private func ask(_ label: String, for command: String) throws(Refusal) -> SecureBytes? {
        var saved = termios()
        let isTerminal = tcgetattr(STDIN_FILENO, &saved) == 0
        if isTerminal {
            var silent = saved
            silent.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        }
        let guardian = isTerminal && Self.restoreOnSignal(saved)
        defer {
            if isTerminal { tcsetattr(STDIN_FILENO, TCSADRAIN, &saved) }
            Self.stopRestoringOnSignal(guardian)
            print("")
        }
        print("\(label): ", terminator: "")
        fflush(nil)  // flushes every output stream; `stdout` is a global Swift 6 cannot reference safely
        do {
            return try input.readLine()
        } catch {
            throw Refusal(description: "\(command): \(error). \(Self.consequence(command))")
        }
    }

    /// Restores the terminal on Ctrl-C (SIGINT) or SIGTERM while echo is off.
    ///
    /// The process then ends with 130 or 143. Ended by the signal's default action, it would leave the user's
    /// terminal not echoing.
    ///
    /// A plain signal handler, installed before the prompt is printed, and not a dispatch source: a dispatch
    /// source is armed asynchronously, and a Ctrl-C typed in between was ignored (found under load, when the
    /// prompt test's SIGINT arrived first and the shell waited forever). The handler only calls
    /// async-signal-safe functions: `tcsetattr`, `write`, `_exit`.
    nonisolated private static func restoreOnSignal(_ saved: termios) -> Bool {
        terminalToRestore.pointee = saved
        for number in [SIGINT, SIGTERM] {
            signal(number) { number in
                var terminal = terminalToRestore.pointee
                tcsetattr(STDIN_FILENO, TCSANOW, &terminal)
                _ = write(STDOUT_FILENO, "\n", 1)
                _exit(128 + number)
            }
        }
        return true
    }

    /// Back to the signals' default actions once echo is on again.
    nonisolated private static func stopRestoringOnSignal(_ installed: Bool) {
        guard installed else { return }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }

    private static func cancelled(_ command: String) -> Refusal {
        Refusal(description: "\(command) cancelled: end of input (Ctrl-D) at the passcode prompt. \(consequence(command))")
    }

    /// What was not done, said for the command that was cancelled.
    private static func consequence(_ command: String) -> String {
        switch command {
        case "device setup": "No device was created."
        case "device change-passcode": "The passcode is unchanged."
        case "device migrate-key": "The keybag stays version 1 (the TPM does not check the passcode); run the command again to move it."
        default: "Nothing was changed."
        }
    }
}

/// The terminal settings the passcode prompt's signal handler puts back.
///
/// They are read only in the handler, and written before it is installed. They are on the heap, allocated once:
/// AddressSanitizer reported the handler's copy into a global `termios` as a write past that global.
nonisolated(unsafe) private let terminalToRestore: UnsafeMutablePointer<termios> = {
    let pointer = UnsafeMutablePointer<termios>.allocate(capacity: 1)
    pointer.initialize(to: termios())
    return pointer
}()
