/// A bug planted on purpose, so the simulator's own tests can show that its invariants catch it.
///
/// One type for every layer: the harness sets one value (`--plant` on the command line), and each layer looks
/// only for its own cases — the simulated disk for a missing `fsync`, the device for a wipe it does not finish,
/// the store for a merge that truncates, the controller for a coordinator it keeps.
package enum PlantedFault: String, Sendable, CaseIterable {
    /// The coordinator is kept after its store closed, so app code holds a coordinator with no usable store
    /// behind it. Planted in `DataController`.
    case keepCoordinatorAfterClose = "keep-coordinator-after-close"
    /// An inbox append returns before the inbox is synced.
    ///
    /// A power cut loses an acknowledged write. Planted in the ``SimulatedDisk``, which records the sync
    /// without making anything durable.
    case missingInboxFsync = "missing-inbox-fsync"
    /// A new key file's folder is not synced after the file is linked in.
    ///
    /// A power cut loses the key, and with it the store. Planted in the ``SimulatedDisk``, as
    /// ``missingInboxFsync``.
    case missingDirectoryFsync = "missing-directory-fsync"
    /// Boot does not finish an erase that recorded itself.
    ///
    /// The keybag and the device key stay on disk after a wipe. Planted in the keybag device
    /// (`KeybagDevice`), which the harness boots with it.
    case wipeNotRolledForward = "wipe-not-rolled-forward"
    /// The inbox merge truncates the whole inbox at the first span it cannot read.
    ///
    /// The span is a damaged or torn record. The intact records after the damage are lost. Planted in the
    /// store's configuration.
    case mergeTruncatesUnread = "merge-truncates-unread"
}
