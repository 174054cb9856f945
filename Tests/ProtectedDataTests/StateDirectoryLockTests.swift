import TestSupport
import Foundation
import SecureKeys
import Testing

@testable import ProtectedData

@Suite("State directory lock: one owner at a time")
struct StateDirectoryLockTests {
    /// The `DeviceError` `body` throws, or `nil`.
    func deviceError(_ body: () throws -> Void) -> DeviceError? {
        do {
            try body()
            return nil
        } catch {
            return error as? DeviceError
        }
    }

    @Test("acquire, release, acquire again; holder(of:) names this process while held and nobody after; the file stays")
    func acquireReleaseReacquire() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")  // missing: acquire creates it
        #expect(StateDirectoryLock.holder(of: state) == nil)
        let lock = try StateDirectoryLock.acquire(state)
        #expect(lock.directory == state)
        #expect(StateDirectoryLock.holder(of: state) == getpid())
        let mode = try (FileManager.default.attributesOfItem(atPath: state)[.posixPermissions] as! NSNumber).intValue
        #expect(mode == 0o700)
        lock.release()
        lock.release()  // idempotent
        #expect(StateDirectoryLock.holder(of: state) == nil)
        #expect(FileManager.default.fileExists(atPath: state + "/owner.lock"), "the lock file is never unlinked")
        let again = try StateDirectoryLock.acquire(state)
        #expect(StateDirectoryLock.holder(of: state) == getpid())
        again.release()
    }

    @Test("a second acquire in the same process is refused with state-in-use naming this process (another process: its id and the agent); freeing the first lets it in")
    func secondAcquireInTheSameProcess() throws {
        let directory = TemporaryDirectory()
        var first: StateDirectoryLock? = try StateDirectoryLock.acquire(directory.path)
        let error = try #require(deviceError { _ = try StateDirectoryLock.acquire(directory.path) })
        #expect(error.code == .stateInUse)
        #expect(error.holderProcessID == getpid())
        #expect(error.message.contains("in use by this process (\(getpid()))"), "\(error.message)")
        // For another process, the message names it and the agent; for one whose id is unknown, another process.
        let other = DeviceError.stateInUse("/tmp/state", holder: 1)
        #expect(other.description.hasPrefix("state-in-use: the state directory /tmp/state is in use by process 1; quit it"))
        #expect(other.message.contains("`protected-store device serve --state-dir /tmp/state`"))
        #expect(DeviceError.stateInUse("/tmp/state", holder: nil).message.contains("in use by another process; quit it"))
        #expect(first?.isHeld == true)
        first = nil  // deinit releases
        #expect(StateDirectoryLock.holder(of: directory.path) == nil)
        _ = try StateDirectoryLock.acquire(directory.path)
    }

    @Test("a device agent refused by a process that opened the device itself is told to wait for that process, not to start an agent")
    func agentRefusedByAProcessIsToldToQuitIt() {
        let byShell = DeviceError.stateInUse("/tmp/state", holder: 1, requester: .deviceAgent)
        #expect(byShell.code == .stateInUse)
        #expect(byShell.message.hasPrefix("the state directory /tmp/state is in use by process 1, which opened the device itself"), "\(byShell.message)")
        #expect(byShell.message.contains("an agent can serve the directory only once that process ends"), "\(byShell.message)")
        #expect(!byShell.message.contains("start `protected-store device serve"), "\(byShell.message)")
        let byAgent = DeviceError.stateInUse("/tmp/state", holder: 1, byAgent: true, requester: .deviceAgent)
        #expect(byAgent.message.hasPrefix("the state directory /tmp/state is already served by a device agent (process 1)"), "\(byAgent.message)")
        // A process that opens the device itself is still told it can go through an agent.
        #expect(DeviceError.stateInUse("/tmp/state", holder: 1).message.contains("or start `protected-store device serve"))
    }

    /// A folder made read-only the way it happens (a read-only mount): a read-only tmpfs mounted on it as root,
    /// or, for another user, a folder without write permission (EACCES). `nil` for root without mount rights.
    static func readOnlyFolder(in directory: TemporaryDirectory) -> (path: String, errno: Int32, unmount: () -> Void)? {
        let path = directory.file("read-only")
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        guard geteuid() == 0 else {
            chmod(path, 0o500)
            return (path, EACCES, { chmod(path, 0o700) })
        }
        let mount = Process()
        mount.executableURL = URL(fileURLWithPath: "/bin/mount")
        mount.arguments = ["-t", "tmpfs", "-o", "ro,mode=0700", "none", path]
        mount.standardError = FileHandle.nullDevice
        guard (try? mount.run()) != nil else { return nil }
        mount.waitUntilExit()
        guard mount.terminationStatus == 0 else { return nil }
        return (path, EROFS, {
            let unmount = Process()
            unmount.executableURL = URL(fileURLWithPath: "/bin/umount")
            unmount.arguments = ["-l", path]
            try? unmount.run()
            unmount.waitUntilExit()
        })
    }

    static let canMakeReadOnlyFolder: Bool = {
        let directory = TemporaryDirectory()
        guard let folder = readOnlyFolder(in: directory) else { return false }
        folder.unmount()
        return true
    }()

    @Test(
        "a new state directory on a read-only mount is refused with the real cause (EROFS, EACCES) and the lock file's path, not the fallback's ENOENT",
        .enabled(if: canMakeReadOnlyFolder, "needs mount rights as root (a read-only tmpfs) or a non-root user"))
    func readOnlyDirectoryNamesTheRealCause() throws {
        let directory = TemporaryDirectory()
        let folder = try #require(Self.readOnlyFolder(in: directory))
        defer { folder.unmount() }
        let error = try #require(keysError { _ = try StateDirectoryLock.acquire(folder.path) })
        #expect(error.code == .ioError)
        #expect(error.systemErrno == folder.errno, "\(error)")
        #expect(error.path == folder.path + "/owner.lock")
        #expect(error.message.hasPrefix("cannot create the lock file \(folder.path)/owner.lock: \(String(cString: strerror(folder.errno)))"), "\(error.message)")
        #expect(!error.message.contains("No such file or directory"), "\(error.message)")
    }

    @Test("a booted device refuses a second boot on its directory with state-in-use; after powerOff() the boot succeeds")
    func bootedDeviceOwnsItsDirectory() throws {
        let fixture = try DeviceFixture()
        #expect(StateDirectoryLock.holder(of: fixture.directory.path) == getpid())
        let error = deviceError { _ = try KeybagDevice(bootingFrom: fixture.directory.path, clock: fixture.clock) }
        #expect(error?.code == .stateInUse)
        #expect(error?.holderProcessID == getpid())
        fixture.device.powerOff()
        #expect(StateDirectoryLock.holder(of: fixture.directory.path) == nil)
        let rebooted = try KeybagDevice(bootingFrom: fixture.directory.path, clock: fixture.clock)
        #expect(rebooted.lockState == .beforeFirstUnlock)
        #expect(StateDirectoryLock.holder(of: fixture.directory.path) == getpid())
    }

    @Test("with ownership:, the device uses the caller's lock and gives it up neither at powerOff() nor when freed")
    func ownershipStaysWithTheCaller() throws {
        let directory = TemporaryDirectory()
        let lock = try StateDirectoryLock.acquire(directory.path)
        var device: KeybagDevice? = try KeybagDevice.setUp(
            in: directory.path, passcode: try SecureBytes(utf8: "1234"), configuration: .init(kdf: .minimal),
            clock: ManualClock(), ownership: lock)
        device?.powerOff()
        #expect(lock.isHeld)
        #expect(deviceError { _ = try KeybagDevice(bootingFrom: directory.path, clock: ManualClock()) }?.code == .stateInUse)
        // The agent's reboot: a new device on the same lock, then the old one freed.
        let rebooted = try KeybagDevice(bootingFrom: directory.path, clock: ManualClock(), ownership: lock)
        device = nil
        #expect(lock.isHeld)
        #expect(StateDirectoryLock.holder(of: directory.path) == getpid())
        rebooted.powerOff()
        #expect(lock.isHeld)
        lock.release()
        _ = try KeybagDevice(bootingFrom: directory.path, clock: ManualClock())
    }

    /// The `SecureKeysError` `body` throws, or `nil`.
    func keysError(_ body: () throws -> Void) -> SecureKeysError? {
        do {
            try body()
            return nil
        } catch {
            return error as? SecureKeysError
        }
    }

    @Test("a symbolic link where owner.lock goes is refused (O_NOFOLLOW) and the file it points to is untouched")
    func lockFileLinkRefused() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        try SecureFile.createDirectory(at: state, in: .real)
        let victim = directory.file("victim.txt")
        try Data("the victim's own data".utf8).write(to: URL(fileURLWithPath: victim))
        try FileManager.default.createSymbolicLink(atPath: state + "/owner.lock", withDestinationPath: victim)
        let error = try #require(keysError { _ = try StateDirectoryLock.acquire(state) })
        #expect(error.code == .insecureStateDirectory)
        #expect(error.message.contains("refusing \(state)/owner.lock: it is a symbolic link"), "\(error.message)")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "the victim's own data")
        #expect(StateDirectoryLock.holder(of: state) == nil, "holder(of:) reads no link either")
    }

    @Test("a hard link to another file where owner.lock goes is refused and the file is untouched")
    func lockFileHardLinkRefused() throws {
        let directory = TemporaryDirectory()
        let state = directory.file("state")
        try SecureFile.createDirectory(at: state, in: .real)
        let victim = directory.file("victim.txt")
        try Data("the victim's own data".utf8).write(to: URL(fileURLWithPath: victim))
        #expect(link(victim, state + "/owner.lock") == 0)
        let error = try #require(keysError { _ = try StateDirectoryLock.acquire(state) })
        #expect(error.code == .insecureStateDirectory)
        #expect(error.message.contains("it has 2 names (a hard link to another file)"), "\(error.message)")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "the victim's own data")
    }

    @Test("an existing device/, hardware/ or agent/ folder others may write is refused when the directory is taken, naming the folder")
    func writableDeviceFoldersRefused() throws {
        for folder in ["device", "hardware", "agent"] {
            let directory = TemporaryDirectory()
            let state = directory.file("state")
            try SecureFile.createDirectory(at: state + "/" + folder, in: .real)
            chmod(state + "/" + folder, 0o777)
            let error = try #require(keysError { _ = try StateDirectoryLock.acquire(state) })
            #expect(error.code == .insecureStateDirectory)
            #expect(error.path == state + "/" + folder)
            #expect(error.message.contains("other users may write in it (mode 0777)"), "\(error.message)")
        }
    }
}
