import Foundation

/// A fresh directory under the system's temporary folder, removed when the value goes away.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init() {
        var template = Array((NSTemporaryDirectory() + "/protectedstore-test-XXXXXX").utf8CString)
        let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(created != nil, "mkdtemp failed")
        path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The path of `name` inside the directory.
    public func file(_ name: String) -> String { path + "/" + name }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

extension Array where Element == UInt8 {
    /// Bytes from a hexadecimal string (test vectors).
    public init(hex: String) {
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            bytes.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        self = bytes
    }

    /// Lower-case hexadecimal.
    public var hex: String { map { String(format: "%02x", $0) }.joined() }
}
