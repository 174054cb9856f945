import Foundation
import ProtectedStoreHarness
import TestSupport
import Testing

@Suite("Regular files of a state directory")
struct RegularFileTests {
    @Test("lists regular files in nested folders by relative name, sorted; not folders, not symbolic links")
    func listsRegularFilesOnly() throws {
        let directory = TemporaryDirectory()
        let files = FileManager.default
        try files.createDirectory(atPath: directory.file("device/inner"), withIntermediateDirectories: true)
        try Data("abc".utf8).write(to: URL(fileURLWithPath: directory.file("z.sqlite")))
        try Data("12345".utf8).write(to: URL(fileURLWithPath: directory.file("device/inner/state.json")))
        try Data().write(to: URL(fileURLWithPath: directory.file("a.inbox")))
        try files.createSymbolicLink(atPath: directory.file("link-to-device"), withDestinationPath: directory.file("device"))
        try files.createSymbolicLink(atPath: directory.file("link-to-file"), withDestinationPath: directory.file("z.sqlite"))

        let listed = RegularFile.all(under: directory.path)
        #expect(listed.map(\.name) == ["a.inbox", "device/inner/state.json", "z.sqlite"])
        #expect(listed.map(\.size) == [0, 5, 3])
    }

    @Test("a file rewritten with another size has another signature; an untouched one keeps its signature")
    func signatureTellsChange() throws {
        let directory = TemporaryDirectory()
        try Data("one".utf8).write(to: URL(fileURLWithPath: directory.file("changes")))
        try Data("same".utf8).write(to: URL(fileURLWithPath: directory.file("stays")))
        let before = Dictionary(uniqueKeysWithValues: RegularFile.all(under: directory.path).map { ($0.name, $0.signature) })
        try Data("one two".utf8).write(to: URL(fileURLWithPath: directory.file("changes")))
        let after = Dictionary(uniqueKeysWithValues: RegularFile.all(under: directory.path).map { ($0.name, $0.signature) })
        #expect(before["changes"] != after["changes"])
        #expect(before["stays"] == after["stays"])
    }

    @Test("a folder that does not exist lists nothing")
    func missingFolder() {
        #expect(RegularFile.all(under: "/nonexistent-\(UUID().uuidString)").isEmpty)
    }
}
