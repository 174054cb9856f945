import Foundation
import Testing

/// The DocC article `KeyFileFormats` is where the documentation's pages point for the file formats: it must hold
/// the specification `keys/README.md` holds, not an older copy of it.
@Suite("KeyFileFormats article")
struct KeyFileFormatsArticleTests {
    static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    @Test("the KeyFileFormats article holds keys/README.md's specification, from its primitives to its threat model, word for word")
    func articleHoldsTheSpecification() throws {
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("keys/README.md"), encoding: .utf8)
        let article = try String(
            contentsOf: Self.packageRoot.appendingPathComponent("Sources/SecureKeys/Documentation.docc/KeyFileFormats.md"),
            encoding: .utf8)
        let start = try #require(readme.range(of: "\nPrimitives (libsodium"), "keys/README.md has no primitives section")
        let specification = readme[start.lowerBound...]
        #expect(article.hasSuffix(specification), "KeyFileFormats.md does not end with keys/README.md's text from \"Primitives\" on: copy it again")
        for section in ["## Keybag, version 1", "## Store key file", "### Rewriting a store", "## Exports", "### Backup file", "## Threat model"] {
            #expect(article.contains(section), "the article lacks \(section)")
        }
    }
}
