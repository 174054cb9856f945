/// The tool's version, as `protected-store --version` prints it.
///
/// It is the version CHANGELOG.md's first heading names (a test checks they agree): bump both together.
enum ToolVersion {
    /// The current version, in semantic versioning (`MAJOR.MINOR.PATCH`).
    static let current = "0.1.0"
}
