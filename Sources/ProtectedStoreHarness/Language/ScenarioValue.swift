/// Values the command language can name without writing them out.
public enum ScenarioValue: Sendable {
    /// `count` bytes of `0123456789abcdef` repeated.
    ///
    /// This is what `--bytes N` stands for.
    public static func filled(_ count: Int) -> String {
        // By doubling copies: a byte-by-byte map took about a second for 4 MiB in a debug build, which the
        // simulator's values at the inbox's limit made most of a run's time.
        var bytes = Array("0123456789abcdef".utf8)
        while bytes.count < count { bytes += bytes }
        return String(decoding: bytes[..<count], as: UTF8.self)
    }

    /// The words that write `value`.
    ///
    /// They are `--bytes N` for a long filled value, the value quoted otherwise.
    static func words(_ value: String) -> String {
        let count = value.utf8.count
        if count > 64, value == filled(count) { return "--bytes \(count)" }
        return quoted(value)
    }
}
