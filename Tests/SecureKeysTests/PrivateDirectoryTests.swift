import TestSupport
import Foundation
import Testing

@testable import SecureKeys

/// The StrictModes check every folder holding keys passes (invariant 10).
@Suite("Private directories: owner, mode, links and the folders above")
struct PrivateDirectoryTests {
    /// The `SecureKeysError` `body` throws, or `nil`.
    func refusal(_ body: () throws -> Void) -> SecureKeysError? {
        do {
            try body()
            return nil
        } catch {
            return error as? SecureKeysError
        }
    }

    @Test("an existing group- or world-writable directory is refused by createDirectory, naming the path, the mode and `chmod 700`")
    func writableDirectoryRefused() throws {
        let directory = TemporaryDirectory()
        for mode: mode_t in [0o777, 0o770, 0o722] {
            let state = directory.file("state-\(String(mode, radix: 8))")
            try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
            chmod(state, mode)
            let error = try #require(refusal { try SecureFile.createDirectory(at: state, in: .real) })
            #expect(error.code == .insecureStateDirectory)
            #expect(error.path == state)
            #expect(error.message.contains("refusing \(state): other users may write in it (mode 0\(String(mode, radix: 8)))"), "\(error.message)")
            #expect(error.message.contains("Run `chmod 700 \(state)`"))
            chmod(state, 0o755)  // readable by others is allowed, as ssh allows it
            try SecureFile.createDirectory(at: state, in: .real)
        }
    }

    @Test(
        "a directory another user owns is refused, even for root, naming the owner",
        .enabled(if: geteuid() == 0, "needs root to give a folder to another user"))
    func anotherUsersDirectoryRefused() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: false)
        chmod(state, 0o700)
        #expect(chown(state, 65534, 65534) == 0)
        let error = try #require(refusal { try SecureFile.createDirectory(at: state, in: .real) })
        #expect(error.code == .insecureStateDirectory)
        #expect(error.message.contains("it belongs to user nobody (uid 65534), not to you, user root (uid 0)"), "\(error.message)")
        #expect(error.message.contains("Root too refuses it"))
    }

    @Test("a symbolic link in the directory's place is refused, naming where it points; a trailing slash does not let it through")
    func linkRefused() throws {
        let directory = TemporaryDirectory()
        let real = directory.file("real")
        try SecureFile.createDirectory(at: real, in: .real)
        let link = directory.file("link")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        for path in [link, link + "/"] {
            let error = try #require(refusal { try SecureFile.createDirectory(at: path, in: .real) })
            #expect(error.code == .insecureStateDirectory)
            #expect(error.message.contains("it is a symbolic link (to \(real))"), "\(error.message)")
        }
    }

    @Test("a folder above that others may write without the sticky bit is refused before anything is made in it; with the sticky bit (as /tmp) it is fine")
    func foldersAbove() throws {
        let directory = TemporaryDirectory()
        let open = directory.file("open")
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: false)
        chmod(open, 0o777)
        let state = open + "/a/state"
        let error = try #require(refusal { try SecureFile.createDirectory(at: state, in: .real) })
        #expect(error.code == .insecureStateDirectory)
        #expect(error.message.contains("/open above it may be written by other users (mode 0777"), "\(error.message)")
        #expect(!FileManager.default.fileExists(atPath: open + "/a"))
        chmod(open, 0o1777)
        try SecureFile.createDirectory(at: state, in: .real)
        #expect(FileManager.default.fileExists(atPath: state))
    }

    @Test(
        "a key file another user owns is refused even at mode 0600",
        .enabled(if: geteuid() == 0, "needs root to give a file to another user"))
    func anotherUsersKeyFileRefused() throws {
        let directory = TemporaryDirectory()
        let path = directory.file("uid.key")
        try SecureFile.writeAtomically([1, 2, 3], to: path, replacing: false, in: .real)
        #expect(chown(path, 65534, 65534) == 0)
        let error = try #require(refusal { _ = try SecureFile.read(path) })
        #expect(error.code == .insecurePermissions)
        #expect(error.message.contains("belongs to user nobody (uid 65534)"), "\(error.message)")
    }
}
