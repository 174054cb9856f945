#if canImport(Glibc)
import Glibc
#endif
package import SystemPackage

/// Runs a system call that returns -1 and sets `errno` when it fails, again while it is interrupted.
///
/// What swift-system's `retryOnInterrupt` does for the calls it wraps, for those it does not (`fsync`, `link`,
/// `rename`, `unlink`, `mkdir`, `fstat`).
///
/// - Returns: what the call returned.
/// - Throws: the call's `Errno`.
@discardableResult
package func retryOnInterrupt<Result: FixedWidthInteger>(_ call: () -> Result) throws(Errno) -> Result {
    while true {
        let result = call()
        if result != -1 { return result }
        let error = Errno(rawValue: errno)
        if error != .interrupted { throw error }
    }
}

/// Runs a swift-system call, whose failures are each an `Errno`, as a call that throws only `Errno`.
@discardableResult
package func systemCall<Result>(_ call: () throws -> Result) throws(Errno) -> Result {
    do { return try call() } catch { throw error as? Errno ?? .ioError }
}

extension FileDescriptor {
    /// Reads exactly `count` bytes at `offset`, retrying short and interrupted reads.
    ///
    /// - Throws: the `Errno` of a failed read; `Errno.ioError` when the file ends before `count` bytes.
    package func read(exactly count: Int, at offset: Int) throws(Errno) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = try systemCall {
                try bytes.withUnsafeMutableBytes { buffer in
                    try read(fromAbsoluteOffset: Int64(offset + done), into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]))
                }
            }
            guard got > 0 else { throw .ioError }
            done += got
        }
        return bytes
    }

    /// Makes the file's data durable (`fsync`).
    ///
    /// - Throws: the `Errno` of the failed `fsync`.
    package func sync() throws(Errno) {
        try retryOnInterrupt { fsync(rawValue) }
    }
}
