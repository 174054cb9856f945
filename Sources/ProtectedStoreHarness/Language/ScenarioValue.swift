/// Values the command language can name without writing them out.
public enum ScenarioValue: Sendable {
    /// `count` bytes of `0123456789abcdef` repeated: what `--bytes N` stands for.
    public static func filled(_ count: Int) -> String {
        let pattern = Array("0123456789abcdef".utf8)
        return String(decoding: (0..<count).lazy.map { pattern[$0 % pattern.count] }, as: UTF8.self)
    }

    /// The words that write `value`: `--bytes N` for a long filled value, the value quoted otherwise.
    static func words(_ value: String) -> String {
        let count = value.utf8.count
        if count > 64, value == filled(count) { return "--bytes \(count)" }
        return quoted(value)
    }
}
