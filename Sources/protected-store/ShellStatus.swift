import ArgumentParser

/// What went wrong in a shell session, and when the shell stops because of it.
///
/// Reading a pipe or a file, the shell stops at the first error, so a script fed to it never runs on past a
/// mistake (and exits 0 only when every line was read and held); at a terminal, or with `--keep-going`, it
/// reports each error and goes on.
struct ShellStatus {
    /// An error, ordered by the exit status it gives.
    enum Failure: Int32, Comparable {
        /// An `expect` that did not hold.
        ///
        /// The shell exits 1, as `run` does.
        case failedExpectation = 1
        /// A line that could not be parsed.
        ///
        /// The shell exits 2, as `run` does.
        case unparsableLine = 2

        static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// Whether the first error ends the session.
    let stopsAtFirstError: Bool
    /// The worst error so far.
    private(set) var worst: Failure?

    init(stopsAtFirstError: Bool) {
        self.stopsAtFirstError = stopsAtFirstError
    }

    /// Reports `message` on standard error and remembers `failure`.
    ///
    /// - Throws: `ExitCode` with the failure's status when the session stops at the first error.
    mutating func record(_ failure: Failure, _ message: String) throws(ExitCode) {
        StandardError.write(message)
        worst = max(worst ?? failure, failure)
        if stopsAtFirstError { throw ExitCode(failure.rawValue) }
    }

    /// - Throws: `ExitCode` with the worst failure's status, if there was one.
    func finish() throws(ExitCode) {
        if let worst { throw ExitCode(worst.rawValue) }
    }
}
