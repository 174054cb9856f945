internal import CEditLine
import Foundation
import ProtectedStoreHarness
import SecureKeys
import Glibc
import SystemPackage

/// The shell's lines at a terminal, read with libedit.
///
/// The line can be edited (arrows, Ctrl-A, Ctrl-E, …), and the up and down arrows walk through the history, which is
/// kept in a file of the state directory. Ctrl-C clears the line and Ctrl-D on an empty line ends the input.
///
/// A line that may hold a passcode (``ScenarioSyntax/holdsPasscode``) or a value the app stores
/// (``ScenarioSyntax/holdsValue``), or that names no command, is never kept
/// in the history nor written to its file; the caller decides, through ``remember(_:)``. What libedit keeps of a
/// line once it is returned — the text it hands back and its own edit buffer — is zeroed as the line is copied
/// into guarded memory. Its kill buffer (Ctrl-U, Ctrl-W) and the line it saves when the up arrow is pressed
/// mid-line are libedit's own, out of reach.
@MainActor
final class LineEditor {
    /// What ``readLine(prompt:)`` read.
    enum Input {
        /// A line, without its line feed, in guarded memory.
        ///
        /// Wipe it once it is parsed.
        case line(SecureBytes)
        /// Ctrl-C (SIGINT) while the line was typed.
        ///
        /// What was typed is dropped.
        case interrupted
        /// Ctrl-D on an empty line, or the terminal went away.
        case end
    }

    private let editLine: OpaquePointer
    private let history: OpaquePointer
    private var event = HistEvent()
    /// Where the history is kept, or `nil` when it is kept only for this session (its file could not be read).
    private let historyFile: String?

    /// How many lines the history keeps.
    static let historySize: Int32 = 1000

    /// Sets libedit up on standard input and output.
    ///
    /// - Parameter historyFile: the history's file: read now when it exists, written (mode 0600) after each
    ///   line kept.
    /// - Returns: `nil` when libedit cannot be set up: the shell then reads lines as it does from a pipe.
    init?(historyFile: String) {
        // libedit decodes what is typed with the C library's multibyte functions: without a UTF-8 locale, every
        // byte of a non-ASCII character would be dropped as invalid.
        if setlocale(LC_CTYPE, "") == nil || String(cString: nl_langinfo(nl_item(CODESET))) != "UTF-8" {
            _ = setlocale(LC_CTYPE, "C.UTF-8")
        }
        guard let editLine = ps_el_init_standard("protected-store") else { return nil }
        guard let history = history_init() else {
            el_end(editLine)
            return nil
        }
        self.editLine = editLine
        self.history = history
        _ = ps_history_set_size(history, &event, Self.historySize)
        _ = ps_history_set_unique(history, &event, 1)
        _ = ps_el_set_editor(editLine, "emacs")
        _ = ps_el_set_history(editLine, history)
        _ = ps_el_set_prompt(editLine) { _ in currentPrompt.pointee }
        if interruptPipe[0] < 0 {
            var ends: [Int32] = [-1, -1]
            guard pipe(&ends) == 0 else {
                history_end(history)
                el_end(editLine)
                return nil
            }
            for end in ends {
                _ = fcntl(end, F_SETFD, FD_CLOEXEC)
                _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            }
            interruptPipe[0] = ends[0]
            interruptPipe[1] = ends[1]
        }
        _ = ps_el_set_read_character(editLine, readCharacter)
        _ = el_source(editLine, nil)  // the user's ~/.editrc (or $EDITRC), as other programs using libedit do
        self.historyFile = Self.load(historyFile, into: history, event: &event)
    }

    isolated deinit {
        history_end(history)
        el_end(editLine)
    }

    /// Shows `prompt` and reads one line, with editing and history.
    ///
    /// While the line is typed, SIGINT is caught by a handler that only writes a byte to a pipe, and libedit
    /// reads each character through ``readCharacter``, which waits on the terminal and that pipe at once: Ctrl-C
    /// then ends the read, whichever thread the signal was delivered to (the main actor's code runs on one of
    /// libdispatch's threads, which block SIGINT) and even when it came before the read began. Once the line is
    /// read the previous disposition is back, so that Ctrl-C during a command does what it did before.
    func readLine(prompt: String) throws -> Input {
        let text = strdup(prompt)
        let previousPrompt = currentPrompt.pointee
        currentPrompt.pointee = text
        defer {
            currentPrompt.pointee = previousPrompt
            free(text)
        }
        drainInterrupts()  // a Ctrl-C that came after the last line was read is not for this one
        var previous = sigaction()
        var interrupt = sigaction()
        interrupt.__sigaction_handler.sa_handler = { _ in
            // Async-signal-safe: one write(2), and errno as the interrupted code had it.
            let errorNumber = errno
            var byte: UInt8 = 1
            _ = write(interruptPipe[1], &byte, 1)
            errno = errorNumber
        }
        sigemptyset(&interrupt.sa_mask)
        interrupt.sa_flags = SA_RESTART
        sigaction(SIGINT, &interrupt, &previous)
        // Editing mode before the prompt shows: a Ctrl-D typed as soon as it shows is a character libedit
        // reads, not the end of a line the terminal's own line editing would cut.
        _ = ps_el_prepare_terminal(editLine)
        var count: Int32 = 0
        let read = el_gets(editLine, &count)
        let readError = errno
        sigaction(SIGINT, &previous, nil)
        // libedit's own (wide-character) edit buffer holds what was typed, whichever way the read ended: a
        // line, Ctrl-C over a half-typed `device unlock --passcode …`, Ctrl-D. Zeroed up to its last character
        // on every path. (Text deleted before Return, or cut with Ctrl-U/Ctrl-K/Ctrl-W into libedit's kill
        // buffer, is out of reach of its API.)
        defer {
            if let info = el_wline(editLine), let buffer = info.pointee.buffer {
                let characters = info.pointee.lastchar - buffer
                if characters > 0 {
                    secureZero(
                        UnsafeMutableRawBufferPointer(
                            start: UnsafeMutableRawPointer(mutating: buffer), count: characters * MemoryLayout<wchar_t>.stride))
                }
            }
        }
        guard let read, count > 0 else {
            return count < 0 && readError == EINTR ? .interrupted : .end
        }
        let length = Int(count) - (read[Int(count) - 1] == UInt8(ascii: "\n") ? 1 : 0)
        // Copied into guarded memory — or not, out of memory — and libedit's copies zeroed either way.
        let line = Result { try SecureBytes(copying: UnsafeRawBufferPointer(start: read, count: length)) }
        // libedit's copy of the line it returned (its edit buffer is zeroed on the way out).
        secureZero(UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(mutating: read), count: Int(count)))
        return .line(try line.get())
    }

    /// Keeps `line` in the history (the up arrow brings it back) and writes the history to its file.
    ///
    /// Call it only for a line that holds no passcode and no value: the history and its file keep what they are
    /// given.
    func remember(_ line: SecureBytes) {
        let entered: Int32? = try? line.withUnsafeBytes { bytes in
            // The line as a C string, for libedit, in memory zeroed once libedit has copied it.
            let text = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count + 1, alignment: 1)
            defer {
                secureZero(text)
                text.deallocate()
            }
            text.copyMemory(from: bytes)
            text[bytes.count] = 0
            return ps_history_enter(history, &event, text.baseAddress!.assumingMemoryBound(to: CChar.self))
        }
        guard entered ?? -1 >= 0, let historyFile else { return }
        save(to: historyFile)
    }

    /// Writes the history to a new file next to `path`, then renames it over `path`.
    ///
    /// The new file has mode 0600 from its creation and never follows a link. A crash leaves the old history or the new
    /// one, never half of it.
    private func save(to path: String) {
        let temporary = path + ".new"
        let descriptor: FileDescriptor
        do {
            descriptor = try FileDescriptor.open(
                temporary, .writeOnly, options: [.create, .truncate, .noFollow, .closeOnExec],
                permissions: .ownerReadWrite)
        } catch {
            StandardError.write("history: cannot write \(temporary): \(error)")
            return
        }
        guard let file = fdopen(descriptor.rawValue, "w") else {
            try? descriptor.close()
            return
        }
        let saved = ps_history_save_fp(history, &event, file)
        let flushed = fflush(file) == 0 && fsync(descriptor.rawValue) == 0
        fclose(file)
        guard saved >= 0, flushed, rename(temporary, path) == 0 else {
            StandardError.write("history: cannot write \(path): \(Errno(rawValue: errno).description)")
            unlink(temporary)
            return
        }
    }

    /// Reads the history file at `path` when there is one.
    ///
    /// - Returns: `path` when the history is to be written there; `nil` when a file is there that is not a
    ///   history libedit can read: it is left as it is (never overwritten), and this session's history is not
    ///   written.
    private static func load(_ path: String, into history: OpaquePointer, event: inout HistEvent) -> String? {
        // None yet: the first line kept creates it.
        guard let status = try? Stat(FilePath(path), followTargetSymlink: false) else { return path }
        guard status.type == .regular, ps_history_load(history, &event, path) >= 0 else {
            StandardError.write(
                "history: \(path) is not a history file this shell wrote; it is left as it is, and this session's "
                    + "history is not saved (move the file away to keep history again)")
            return nil
        }
        return path
    }
}

/// The prompt libedit's prompt function returns.
///
/// It is set by ``LineEditor/readLine(prompt:)`` around `el_gets` and read by the function (a C function pointer, which
/// cannot capture it), on the same thread.
nonisolated(unsafe) private let currentPrompt: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?> = {
    let pointer = UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>.allocate(capacity: 1)
    pointer.initialize(to: nil)
    return pointer
}()


/// The SIGINT handler's pipe while a line is read.
///
/// The handler writes a byte to the write end (`[1]`), which ``readCharacter`` waits on beside the terminal. Made once,
/// by the first ``LineEditor``. Both ends are non-blocking, so the handler never blocks on a full pipe.
nonisolated(unsafe) private let interruptPipe: UnsafeMutablePointer<Int32> = {
    let pointer = UnsafeMutablePointer<Int32>.allocate(capacity: 2)
    pointer.initialize(repeating: -1, count: 2)
    return pointer
}()

/// Empties the SIGINT handler's pipe.
private func drainInterrupts() {
    var byte: UInt8 = 0
    while read(interruptPipe[0], &byte, 1) > 0 {}
}

/// Reads one character for libedit (its `EL_GETCFN`), as its own reader does.
///
/// It reads a byte at a time from standard input, decoded by the C library into a wide character, but waits on the
/// SIGINT handler's pipe as well.
///
/// - Returns: 1 with the character; 0 at the end of input; -1 with `errno` `EINTR` after Ctrl-C (libedit then
///   ends the line it reads without returning it), or with the error of a failed read.
private func readCharacter(_ editLine: OpaquePointer?, _ character: UnsafeMutablePointer<wchar_t>?) -> Int32 {
    guard let character else { return -1 }
    character.pointee = 0
    // A byte typed may be a passcode's: the few bytes of one character are zeroed before returning.
    return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 8) { bytes in
        defer { secureZero(UnsafeMutableRawBufferPointer(bytes)) }
        var count = 0
        while true {
            var waiting = [
                pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0),
                pollfd(fd: interruptPipe[0], events: Int16(POLLIN), revents: 0),
            ]
            if poll(&waiting, 2, -1) < 0 {
                if errno == EINTR { continue }
                return -1
            }
            if waiting[1].revents & Int16(POLLIN) != 0 {
                drainInterrupts()
                errno = EINTR
                return -1
            }
            let got = read(STDIN_FILENO, bytes.baseAddress! + count, 1)
            if got < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                return -1
            }
            if got == 0 { return 0 }
            count += 1
            var state = mbstate_t()
            let decoded = mbrtowc(character, bytes.baseAddress!, count, &state)
            if decoded == -2 {
                // An incomplete character: read its next byte, unless it is already longer than any.
                if count < bytes.count { continue }
                count = 0
            } else if decoded == -1 {
                count = 0  // not a character in this locale: dropped, as libedit's own reader drops it
            } else {
                return 1
            }
        }
    }
}
