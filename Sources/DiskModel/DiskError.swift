package import SystemPackage

/// An error of the disk model.
///
/// It is a file-system call that failed, or a request the model or a fault plan cannot carry out.
///
/// The key layer turns it into its own error (`io-error` or `invalid-argument`) with the same words, so a user
/// sees one kind of message whichever layer raised it.
package enum DiskError: Error, Sendable, Equatable {
    /// The file system refused `operation` on `path` with `errno`.
    case io(operation: String, path: String, errno: Errno)
    /// A request the disk model does not accept.
    ///
    /// `message` says which, and `path` names the folder when there is one.
    case invalidArgument(message: String, path: String? = nil)
}
