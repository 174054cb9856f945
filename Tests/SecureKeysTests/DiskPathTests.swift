import DiskModel
import Testing

@testable import SecureKeys

/// The path arithmetic the key files, the private-folder check and the disk model share.
@Suite("Disk paths")
struct DiskPathTests {
    @Test("The folder holding a path: its parent, / for a top-level entry, . for a bare name, trailing slashes ignored")
    func folderContaining() {
        #expect(DiskPath.folder(containing: "/home/me/state/app.sqlite.key") == "/home/me/state")
        #expect(DiskPath.folder(containing: "/state") == "/")
        #expect(DiskPath.folder(containing: "/") == "/")
        #expect(DiskPath.folder(containing: "app.sqlite") == ".")
        #expect(DiskPath.folder(containing: "state/keys/") == "state")
        #expect(DiskPath.folder(containing: "state//keybag") == "state")
        #expect(SecureFile.folder(containing: "/home/me/state/keybag") == "/home/me/state")
    }

    @Test("The folder holding a path is FilePath's: doubled slashes collapse, . and .. stay, an empty path's is .")
    func folderContainingAsFilePath() {
        // What `FilePath(path).removingLastComponent()` gives (`.` when empty), which the disk model used before.
        let expected: [(path: String, folder: String)] = [
            ("", "."), ("//", "/"), ("///state//keys//", "/state"), ("state/", "."), ("/a//b//c", "/a/b"),
            ("a/./b", "a/."), ("/a/../b/", "/a/.."), ("./app.sqlite", "."), ("../app.sqlite", ".."),
            ("/tmp/protected-store-testing-1/app.sqlite-wal", "/tmp/protected-store-testing-1"),
        ]
        for (path, folder) in expected {
            #expect(DiskPath.folder(containing: path) == folder, "\(path)")
        }
    }

    @Test("A path for a system call is FilePath's: each run of slashes one slash, no trailing slash but /")
    func forSystemCall() {
        let expected: [(path: String, system: String)] = [
            ("", ""), ("/", "/"), ("//", "/"), ("a", "a"), ("a/", "a"), ("/a//b///c/", "/a/b/c"), ("a/./b/..", "a/./b/.."),
            ("/tmp/protected-store-testing-1/app.sqlite", "/tmp/protected-store-testing-1/app.sqlite"),
        ]
        for (path, system) in expected {
            #expect(DiskPath.forSystemCall(path) == system, "\(path)")
        }
    }

    @Test("A normalized path is absolute, without . or .. or doubled slashes")
    func normalize() {
        #expect(DiskPath.normalize("/a//b/./c/../d") == "/a/b/d")
        #expect(DiskPath.normalize("/") == "/")
        #expect(DiskPath.normalize("relative").hasSuffix("/relative"))
    }
}
