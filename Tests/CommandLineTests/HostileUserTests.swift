import Foundation
import TestSupport
import Testing

/// Another account on the same machine — `nobody`, through `setpriv`, as the device agent's peer test runs one —
/// tries to hijack a state directory: it makes the directory first (as in `/tmp/phone`), puts a link where the
/// lock file goes, or runs a fake device agent that waits for the passcode. Each attempt is refused before the
/// victim's process writes or sends a byte.
@Suite(
    "Hostile users: another account's state directory, lock-file link and fake agent",
    .timeLimit(.minutes(3)),
    .enabled(if: geteuid() == 0, "needs root to act as another user (setpriv)"))
struct HostileUserTests {
    /// `nobody` and `nogroup` on Debian and Ubuntu.
    static let otherUser: UInt32 = 65534

    /// A folder like `/tmp`: world-writable and sticky, inside a test folder the other user may pass through.
    struct Playground {
        let directory = TemporaryDirectory()
        var shared: String { directory.file("shared") }

        init() throws {
            chmod(directory.path, 0o711)
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
            chmod(shared, 0o1777)
        }
    }

    /// Runs `arguments` as the other user.
    @discardableResult
    static func asOtherUser(_ arguments: [String]) throws -> ProtectedStoreBinary.Result {
        let result = try ProtectedStoreBinary.run(
            [], executable: "setpriv",
            argumentsBefore: ["--reuid=\(otherUser)", "--regid=\(otherUser)", "--clear-groups"] + arguments)
        #expect(result.status == 0, "as the other user, \(arguments): \(result.error)")
        return result
    }

    /// A fake device agent run by the other user: a plain listening socket at `socket` that appends
    /// `received N` to `log` for each connection, N the bytes the client sent before it closed.
    final class FakeAgent {
        let process = Process()
        let log: String

        init(socket: String, log: String) throws {
            self.log = log
            let script = #"""
                use Socket;
                my ($path, $log) = @ARGV;
                socket(my $server, PF_UNIX, SOCK_STREAM, 0) or die "socket: $!";
                unlink $path;
                bind($server, pack_sockaddr_un($path)) or die "bind: $!";
                chmod 0777, $path;
                listen($server, 5) or die "listen: $!";
                open(my $ready, '>', "$log.ready") or die; close $ready;
                while (accept(my $client, $server)) {
                    my ($count, $buffer) = (0, '');
                    while (my $read = sysread($client, $buffer, 65536)) { $count += $read; }
                    open(my $out, '>>', $log) or die; print $out "received $count\n"; close $out;
                }
                """#
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [
                "setpriv", "--reuid=\(otherUser)", "--regid=\(otherUser)", "--clear-groups", "perl", "-e", script, socket, log,
            ]
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            let deadline = ContinuousClock.now + .seconds(30)
            while !FileManager.default.fileExists(atPath: log + ".ready") {
                guard ContinuousClock.now < deadline, process.isRunning else {
                    Issue.record("the fake agent did not start")
                    return
                }
                usleep(10_000)
            }
        }

        /// The byte counts of the connections it has logged so far.
        var received: [Int] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
                .compactMap { $0.hasPrefix("received ") ? Int($0.dropFirst(9)) : nil }
        }

        /// Waits up to `timeout` for `count` connections to be logged.
        func waitForConnections(_ count: Int, timeout: Duration) -> [Int] {
            let deadline = ContinuousClock.now + timeout
            while received.count < count && ContinuousClock.now < deadline { usleep(20_000) }
            return received
        }

        deinit {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    @Test("a state directory another account made first (mode 0700, its own) is refused, naming the path, the owner and the fix; nothing is written in it")
    func anotherAccountsDirectoryIsRefused() throws {
        let playground = try Playground()
        let phone = playground.shared + "/phone"
        try Self.asOtherUser(["mkdir", "-m", "700", phone])

        let victim = try ProtectedStoreBinary.shell(["device setup --passcode 4321"], state: phone)
        #expect(victim.status != 0)
        #expect(victim.error.contains("insecure-state-directory: refusing \(phone): it belongs to user nobody (uid 65534)"), "\(victim.error)")
        #expect(victim.error.contains("Root too refuses it"), "\(victim.error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: phone).isEmpty, "the victim wrote in the other account's folder")
    }

    @Test("a world-writable state directory, or one under a world-writable folder without the sticky bit, is refused with the fix; /tmp's sticky bit is fine")
    func writableDirectoriesAreRefused() throws {
        let playground = try Playground()
        let open = playground.directory.file("open")
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: false)
        chmod(open, 0o777)
        let refused = try ProtectedStoreBinary.shell(["status"], state: open)
        #expect(refused.status != 0)
        #expect(refused.error.contains("refusing \(open): other users may write in it (mode 0777)"), "\(refused.error)")
        #expect(refused.error.contains("Run `chmod 700 \(open)`"), "\(refused.error)")

        let inside = open + "/state"
        let below = try ProtectedStoreBinary.shell(["status"], state: inside)
        #expect(below.status != 0)
        #expect(below.error.contains("/open above it may be written by other users"), "\(below.error)")
        #expect(!FileManager.default.fileExists(atPath: inside), "nothing is created under a folder that fails the check")

        chmod(open, 0o700)
        let fixed = try ProtectedStoreBinary.shell(["device setup --passcode 4321", "expect device unlocked"], state: open)
        #expect(fixed.status == 0, "\(fixed.error)")
        // In a sticky, world-writable folder (as /tmp is), a directory of the victim's own is fine.
        let sticky = try ProtectedStoreBinary.shell(["device setup --passcode 4321", "expect device unlocked"], state: playground.shared + "/mine")
        #expect(sticky.status == 0, "\(sticky.error)")
    }

    @Test("a link the other account put where owner.lock goes never truncates the file it points to: the victim's file is untouched and the open is refused")
    func lockFileLinkIsRefused() throws {
        let playground = try Playground()
        let victimFile = playground.directory.file("precious.txt")
        try Data("the victim's own data\n".utf8).write(to: URL(fileURLWithPath: victimFile))
        let phone = playground.shared + "/phone"
        try Self.asOtherUser(["mkdir", "-m", "777", phone])
        try Self.asOtherUser(["ln", "-s", victimFile, phone + "/owner.lock"])

        let victim = try ProtectedStoreBinary.shell(["device setup --passcode 4321"], state: phone)
        #expect(victim.status != 0)
        #expect(victim.error.contains("insecure-state-directory: refusing \(phone)"), "\(victim.error)")
        #expect(try String(contentsOfFile: victimFile, encoding: .utf8) == "the victim's own data\n")
    }

    @Test("a fake agent in a directory the other account made never receives a byte: the client refuses the directory before it connects")
    func fakeAgentInAnotherAccountsDirectory() throws {
        let playground = try Playground()
        let phone = playground.shared + "/phone"
        try Self.asOtherUser(["mkdir", "-m", "755", phone])
        try Self.asOtherUser(["mkdir", "-m", "755", phone + "/agent"])
        let agent = try FakeAgent(socket: phone + "/agent/device.sock", log: playground.shared + "/fake-agent.log")

        let victim = try ProtectedStoreBinary.shell(["device unlock --passcode 4321"], state: phone)
        #expect(victim.status != 0)
        #expect(victim.error.contains("insecure-state-directory: refusing \(phone): it belongs to user nobody"), "\(victim.error)")
        // A connection, had there been one, is logged when the client closes it: the victim has exited by now.
        let received = agent.waitForConnections(1, timeout: .seconds(2))
        #expect(received.allSatisfy { $0 == 0 }, "the fake agent received \(received) bytes")
    }

    @Test("a socket of another user's process in the victim's own directory: the client checks the peer's uid (SO_PEERCRED) and sends it nothing, not even hello")
    func fakeAgentSocketInTheVictimsDirectory() throws {
        let playground = try Playground()
        let state = playground.directory.file("state")
        try FileManager.default.createDirectory(atPath: state + "/agent", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        chmod(state, 0o700)
        // The other user's listening socket, moved in (as one left from when the folder was open to others).
        let agent = try FakeAgent(socket: playground.shared + "/fake.sock", log: playground.shared + "/fake-agent.log")
        #expect(rename(playground.shared + "/fake.sock", state + "/agent/device.sock") == 0)

        let victim = try ProtectedStoreBinary.shell(["device unlock --passcode 4321"], state: state)
        #expect(victim.status != 0)
        #expect(victim.error.contains("untrusted-agent: the process serving \(state)/agent/device.sock runs as user nobody (uid 65534)"), "\(victim.error)")
        let received = agent.waitForConnections(1, timeout: .seconds(20))
        #expect(received == [0], "the fake agent received \(received) bytes")
    }

    @Test("a per-user folder of temporary state directories another account made first is refused by run, naming it; the run's keys go nowhere")
    func anotherAccountsTemporaryFolderIsRefused() throws {
        let playground = try Playground()
        let folder = playground.shared + "/protected-store-\(geteuid())"
        try Self.asOtherUser(["mkdir", "-m", "777", folder])
        let process = Process()
        process.executableURL = ProtectedStoreBinary.url
        process.arguments = ["run", "--fast-kdf", "-"]
        process.environment = ProcessInfo.processInfo.environment.merging(["TMPDIR": playground.shared + "/"]) { $1 }
        let input = Pipe()
        let errors = Pipe()
        process.standardInput = input
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        try input.fileHandleForWriting.write(contentsOf: Data("device setup --passcode 4321\n".utf8))
        try input.fileHandleForWriting.close()
        let error = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus != 0)
        #expect(error.contains("insecure-state-directory: refusing \(folder): it belongs to user nobody"), "\(error)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
    }
}
