import Glibc
import SystemPackage

/// A regular file in a folder tree, with what tells whether it changed since it was last looked at.
package struct RegularFile: Sendable, Hashable {
    /// The path relative to the folder listed, `/`-separated.
    package let name: String
    package let size: Int
    /// Size and modification time (seconds, nanoseconds).
    ///
    /// Equal signatures mean an unchanged file.
    package let signature: [Int]

    /// Every regular file under `folder` (symbolic links are not followed), sorted by name.
    ///
    /// Straight `readdir`/`lstat`: the simulator lists its state directory after every step, and
    /// `FileManager`'s enumerator spent more time normalizing paths than the step spent on its work.
    package static func all(under folder: String) -> [RegularFile] {
        var files: [RegularFile] = []
        collect(under: folder, prefix: "", into: &files)
        return files.sorted { $0.name < $1.name }
    }

    private static func collect(under folder: String, prefix: String, into files: inout [RegularFile]) {
        guard let directory = opendir(folder) else { return }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let entryName = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if entryName == "." || entryName == ".." { continue }
            let path = folder + "/" + entryName
            guard let info = try? Stat(FilePath(path), followTargetSymlink: false) else { continue }
            switch info.type {
            case .directory:
                collect(under: path, prefix: prefix + entryName + "/", into: &files)
            case .regular:
                files.append(
                    RegularFile(
                        name: prefix + entryName, size: Int(info.size),
                        signature: [Int(info.size), info.st_mtim.tv_sec, info.st_mtim.tv_nsec]))
            default:
                continue
            }
        }
    }
}
