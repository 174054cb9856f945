import Glibc

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
            var info = stat()
            guard lstat(path, &info) == 0 else { continue }
            switch info.st_mode & S_IFMT {
            case S_IFDIR:
                collect(under: path, prefix: prefix + entryName + "/", into: &files)
            case S_IFREG:
                files.append(
                    RegularFile(
                        name: prefix + entryName, size: Int(info.st_size),
                        signature: [Int(info.st_size), info.st_mtim.tv_sec, info.st_mtim.tv_nsec]))
            default:
                continue
            }
        }
    }
}
