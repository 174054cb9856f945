import TestSupport
import Foundation
import Testing

/// The store under a full disk and on a read-only path, each in a real child process (limits and mounts
/// apply to a whole process, not to a test).
@Suite("Hostile environments: disk full, read-only state directory", .timeLimit(.minutes(3)))
struct HostileEnvironmentTests {
    /// Whether this build runs under Thread Sanitizer (its runtime is in the binary, as is the child's).
    static let underThreadSanitizer = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil

    /// A device with a store holding `earlier`, written and acknowledged.
    func prepare(_ directory: TemporaryDirectory, earlier: [String: String]) throws -> String {
        let state = directory.file("state")
        let setUp = try ProtectedStoreBinary.shell(
            ["device setup --passcode 1", "app launch"] + earlier.keys.sorted().map { "put \($0) \(earlier[$0]!)" }
                + ["app terminate"],
            state: state)
        #expect(setUp.status == 0 && !setUp.output.contains("error"), "\(setUp.output)")
        return state
    }

    @Test(
        "disk full (RLIMIT_FSIZE) during writes: the write fails with disk-full, the app keeps running, and every earlier and acknowledged write is intact",
        .disabled(
            if: underThreadSanitizer,
            "Thread Sanitizer's own runtime dies with SIGBUS under RLIMIT_FSIZE; the plain and ASan runs check this"))
    func diskFullDuringWrites() throws {
        let directory = TemporaryDirectory()
        let earlier = Dictionary(uniqueKeysWithValues: (0..<20).map { ("early\($0)", "value\($0)") })
        let state = try prepare(directory, earlier: earlier)
        // Room for a little more than the store holds now: the WAL reaches the limit after a few dozen 4 KiB values.
        let largest = try FileManager.default.contentsOfDirectory(atPath: state)
            .compactMap { try FileManager.default.attributesOfItem(atPath: state + "/" + $0)[.size] as? Int }.max() ?? 0
        let big = String(repeating: "b", count: 4000)
        var lines = ["device unlock --passcode 1", "app launch"]
        for index in 0..<200 { lines += ["put big\(index) \(big)", "get big\(index)"] }
        let full = try ProtectedStoreBinary.shell(lines, state: state, under: ["prlimit", "--fsize=\(largest + 256 * 1024)", "--"])

        #expect(
            full.output.contains("disk-full: no space to write the store"),
            "status \(full.status), output: \(full.output.suffix(600)), errors: \(full.error.suffix(600))")
        #expect(!full.output.contains("store-damaged"))
        var acknowledged = earlier
        for line in full.output.split(separator: "\n") where line.hasPrefix("big") && line.contains(" = ") {
            acknowledged[String(line.split(separator: " ")[0])] = big
        }
        #expect(acknowledged.count > earlier.count, "some writes fitted before the limit")
        #expect(acknowledged.count < earlier.count + 200, "the limit was reached")
        try ProtectedStoreBinary.expectStoreHolds(acknowledged, state: state, also: ["expect integrity ok"])
    }

    @Test("a read-only state directory: a passcode attempt that cannot be counted is refused as read-only (named as such), the store waits, nothing is lost")
    func readOnlyStateDirectory() throws {
        let directory = TemporaryDirectory()
        let state = try prepare(directory, earlier: ["kept": "yes"])
        let mountReadOnly = "mount --bind \"$0\" \"$0\" && mount -o remount,ro,bind \"$0\" \"$0\" && exec \"$@\""
        // A private mount namespace (unshare -rm): the read-only mount is seen by the child only.
        let readOnly = try ProtectedStoreBinary.shell(
            ["device unlock --passcode 1", "app launch", "status", "get kept", "put new value", "status"],
            state: state, under: ["unshare", "-rm", "sh", "-c", mountReadOnly, state])

        // A passcode attempt is counted on disk before it is checked: one that cannot be counted is refused,
        // named as a read-only file system, and the store waits — nothing presented, nothing lost.
        #expect(readOnly.status == 0, "\(readOnly.error)")
        let said = readOnly.output + readOnly.error
        #expect(said.contains("read-only: ") && said.contains("Read-only file system"), "\(said)")
        #expect(!readOnly.output.contains("device          unlocked"), "\(readOnly.output)")
        #expect(!readOnly.output.contains("presented to the user"))
        #expect(!said.contains("store-damaged"))
        try ProtectedStoreBinary.expectStoreHolds(["kept": "yes"], state: state, also: ["expect integrity ok"])
    }
}
