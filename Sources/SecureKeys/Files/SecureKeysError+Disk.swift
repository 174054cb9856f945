package import DiskModel
package import SystemPackage

extension SecureKeysError {
    /// The key layer's error for a failure of the disk model.
    ///
    /// It is `io-error` or `invalid-argument`, in the same words.
    ///
    /// - Parameters:
    ///   - error: what the disk model threw.
    ///   - file: the file that maps it (the caller's, by default).
    ///   - line: the line that maps it (the caller's, by default).
    package init(_ error: DiskError, file: StaticString = #fileID, line: UInt = #line) {
        switch error {
        case .io(let operation, let path, let code):
            self = .io(operation, path: path, errno: code, file: file, line: line)
        case .invalidArgument(let message, let path):
            self.init(code: .invalidArgument, message: message, path: path, file: file, line: line)
        }
    }

    /// The file system refused `operation` on `path` with `errno`.
    package static func io(
        _ operation: String, path: String, errno: Errno, file: StaticString = #fileID, line: UInt = #line
    ) -> Self {
        io(operation, path: path, errno: errno.rawValue, file: file, line: line)
    }
}
