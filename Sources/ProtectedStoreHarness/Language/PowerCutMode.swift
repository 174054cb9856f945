/// What a simulated power cut (`device power-cut --mode …`) keeps of the writes no `fsync` made durable.
public enum PowerCutMode: String, Sendable, Hashable, CaseIterable {
    /// Every unsynced write, and every unsynced creation, rename or removal of a file, is lost.
    case drop
    /// Each file keeps a random prefix of its unsynced writes (in 512-byte sectors).
    ///
    /// Each folder keeps a random prefix of its unsynced entry changes.
    case tornSequence = "torn-sequence"
    /// Each unsynced 512-byte sector is kept or lost at random.
    ///
    /// Folder entry changes are as in `tornSequence`.
    case tornOp = "torn-op"
}
