import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// The check a file written for the user to take away (a backup, an export) passes before it is written.
///
/// The file is not the state directory that holds the store and its keys, does not lie inside it, and is none
/// of its files.
///
/// Paths are not compared as strings: the target's folder is resolved (`realpath`) and every folder from it
/// up to `/` is compared with the state directory by device and inode, and so is the target itself when
/// something is there (followed, so a link to a key file is refused too), against the state directory and
/// every entry in it. A `--replace` aimed at `app.sqlite.key`, or at the keybag through a link or `..`, is
/// refused before anything is written.
package enum StateDirectoryTarget {
    /// Refuses `target` when it is `stateDirectory`, lies inside it, or is one of its files or folders.
    ///
    /// - Parameters:
    ///   - target: the file about to be written.
    ///   - stateDirectory: the folder that holds the store and its keys (and, for a device set up there, the
    ///     device's files). When it does not exist there is nothing in it to protect.
    ///   - what: what is written, for the message (`the backup`, `the export`).
    /// - Throws: `SecureKeysError.Code.invalidArgument` naming the target, the state directory and why.
    package static func checkOutside(_ stateDirectory: String, target: String, what: String) throws {
        guard let directory = try? Stat(FilePath(stateDirectory)).rawValue else { return }
        func refusal(_ why: String) -> SecureKeysError {
            SecureKeysError(
                code: .invalidArgument,
                message: "refusing to write \(what) to \(target): \(why) the state directory \(stateDirectory), which holds the store and its keys; nothing was written. Write it to a folder outside it",
                path: target)
        }
        if let existing = try? Stat(FilePath(target)).rawValue {
            if same(existing, directory) { throw refusal("it is") }
            if let names = FileManager.default.enumerator(atPath: stateDirectory) {
                for case let name as String in names {
                    if let entry = try? Stat(FilePath(stateDirectory + "/" + name), followTargetSymlink: false).rawValue,
                        same(entry, existing)
                    {
                        throw refusal("it is \(name), a file of")
                    }
                }
            }
        }
        let parent = SecureFile.folder(containing: target)
        guard let resolved = realpath(parent, nil) else { return }  // no such folder: the write itself fails
        var folder = String(cString: resolved)
        free(resolved)
        while true {
            if let info = try? Stat(FilePath(folder)).rawValue, same(info, directory) { throw refusal("it lies inside") }
            guard folder != "/" else { return }
            folder = SecureFile.folder(containing: folder)
            if folder.isEmpty || folder == "." { folder = "/" }
        }
    }

    private static func same(_ one: stat, _ other: stat) -> Bool {
        one.st_dev == other.st_dev && one.st_ino == other.st_ino
    }
}
