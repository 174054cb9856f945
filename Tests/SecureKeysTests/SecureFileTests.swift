import TestSupport
import Foundation
import Testing

@testable import SecureKeys

@Suite("Secure files")
struct SecureFileTests {
    func permissions(_ path: String) throws -> Int {
        try (FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as! NSNumber).intValue
    }

    @Test("directories are created 0700 and files 0600, and a replaced file holds the new bytes")
    func permissionsAndReplacement() throws {
        let directory = TemporaryDirectory()
        let nested = directory.file("state/keys")
        try SecureFile.createDirectory(at: nested, in: .real)
        #expect(try permissions(nested) == 0o700)
        let path = nested + "/file"
        try SecureFile.writeAtomically([1, 2, 3], to: path, replacing: false, in: .real)
        #expect(try permissions(path) == 0o600)
        try SecureFile.writeAtomically([4, 5], to: path, replacing: true, in: .real)
        #expect(try SecureFile.read(path) == [4, 5])
        #expect(try FileManager.default.contentsOfDirectory(atPath: nested) == ["file"])
    }

    @Test("reading refuses a symbolic link, a directory and a world-readable file")
    func refusesHostileFiles() throws {
        let directory = TemporaryDirectory()
        let target = directory.file("target")
        try SecureFile.writeAtomically([9], to: target, replacing: false, in: .real)
        try FileManager.default.createSymbolicLink(atPath: directory.file("link"), withDestinationPath: target)
        #expect { try SecureFile.read(directory.file("link")) } throws: { ($0 as? SecureKeysError)?.code == .ioError }
        try FileManager.default.createDirectory(atPath: directory.file("dir"), withIntermediateDirectories: false)
        #expect { try SecureFile.read(directory.file("dir")) } throws: { ($0 as? SecureKeysError)?.code == .ioError }
        chmod(target, 0o644)
        #expect { try SecureFile.read(target) } throws: { ($0 as? SecureKeysError)?.code == .insecurePermissions }
    }

    @Test("a path with trailing or doubled slashes names the entry itself: a link to a folder is a link, not the folder")
    func trailingSlashesDoNotFollowLinks() throws {
        let directory = TemporaryDirectory()
        let folder = directory.file("folder")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let link = directory.file("link")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: folder)
        // The system follows a link named with a trailing slash; a FilePath drops the slash, and so do these.
        #expect { try SecureFile.regularFileSize(at: link + "/") } throws: { error in
            (error as? SecureKeysError)?.message.contains("refusing a symbolic link") == true
        }
        #expect { try SecureFile.read(link + "//") } throws: { error in
            (error as? SecureKeysError)?.message.contains("refusing a symbolic link") == true
        }
        #expect(SecureFile.exists(directory.file("missing/")) == false)
        try SecureFile.writeAtomically([7], to: folder + "/key", replacing: false, in: .real)
        #expect(try SecureFile.regularFileSize(at: folder + "//key") == 1)
    }
}
