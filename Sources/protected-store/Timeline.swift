import ProtectedData
import ProtectedStore

/// Prints what happens, one line per step, in aligned columns: the virtual time, what happened, and the
/// state of protected data, the store, the coordinator, interaction and the queue right after it.
@MainActor
struct Timeline {
    private let columns = [("time", 9), ("event", 50), ("protected data", 26), ("store", 10), ("coordinator", 12), ("UI", 9), ("queued", 6)]

    func header() {
        print(row(columns.map(\.0)))
        print(row(columns.map { String(repeating: "─", count: $0.1) }))
    }

    func record(_ time: Duration, _ event: String, device: SimulatedDevice?, controller: DataController?) {
        let store = controller?.phase.name ?? "—"
        let coordinator = controller.map { $0.coordinator == nil ? "nil" : "assigned" } ?? "—"
        let interaction = controller.map { $0.isInteractionEnabled ? "enabled" : "disabled" } ?? "—"
        let queued = controller.map { String($0.queuedOperationCount) } ?? "—"
        print(row([time.clockText, event, device?.lockState.description ?? "—", store, coordinator, interaction, queued]))
    }

    func note(_ text: String) {
        print(String(repeating: " ", count: columns[0].1 + 2) + "↳ " + text)
    }

    private func row(_ cells: [String]) -> String {
        zip(cells, columns).map { cell, column in
            cell.count >= column.1 ? cell : cell + String(repeating: " ", count: column.1 - cell.count)
        }.joined(separator: "  ")
    }
}

extension Duration {
    /// `0:00.000`: minutes, seconds and milliseconds of virtual time.
    var clockText: String {
        let milliseconds = components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
        let minutes = milliseconds / 60_000
        let seconds = (milliseconds % 60_000) / 1000
        let rest = milliseconds % 1000
        return "\(minutes):" + (seconds < 10 ? "0" : "") + "\(seconds)." + String(String(rest + 1000).dropFirst())
    }
}
