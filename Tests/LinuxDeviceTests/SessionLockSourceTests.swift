import Foundation
import LinuxDevice
import ProtectedData
import Testing

/// The lock source against a mock logind on a private bus: what it finds, what it reports, and that it stops
/// cleanly.
@Suite("SessionLockSource", .serialized, .enabled(if: MockBuses.available, Comment(rawValue: MockBuses.missing)))
struct SessionLockSourceTests {
    @Test("status finds this process's session by GetSessionByPID and reads its LockedHint")
    func findsCallerSession() throws {
        let logind = try MockLogind()
        try logind.setLockedHint(true)
        let source = try SessionLockSource(systemBus: logind.bus.bus, sessionBus: nil) { _ in }
        defer { source.stop() }
        let status = source.status
        #expect(status.session.id == "c1")
        #expect(status.session.path == logind.sessionPath)
        #expect(status.session.lookup == .callerProcess(pid: getpid()))
        #expect(status.lockedHint)
        #expect(status.isLocked)
        #expect(status.systemBus == .address(logind.bus.address))
    }

    @Test("a process in no session (a user service) follows its user's display session, and says so")
    func fallsBackToDisplaySession() throws {
        let logind = try MockLogind(processInSession: false)
        try logind.run(
            "properties('/org/freedesktop/login1/user/\(getuid())').Set('org.freedesktop.login1.User', 'Display', "
                + "dbus.Struct(('c1', dbus.ObjectPath('\(logind.sessionPath)')), signature='so'))")
        let source = try SessionLockSource(systemBus: logind.bus.bus, sessionBus: nil) { _ in }
        defer { source.stop() }
        guard case .userDisplay(let uid, let reason) = source.session.lookup else {
            Issue.record("found by \(source.session.lookup)")
            return
        }
        #expect(uid == getuid())
        #expect(reason.contains("NoSessionForPID"))
        #expect(source.session.id == "c1")
    }

    @Test("with no display session either, one of the user's sessions from ListSessions, graphical and active first")
    func fallsBackToListedSessions() throws {
        let logind = try MockLogind(processInSession: false)
        // A second session of the user, graphical: preferred over the first (type `test`).
        try logind.run(
            """
            mock().AddSession('c2', 'seat0', dbus.UInt32(\(getuid())), 'tester', True)
            properties('/org/freedesktop/login1/session/c2').Set('org.freedesktop.login1.Session', 'Type', 'wayland')
            """)
        let source = try SessionLockSource(systemBus: logind.bus.bus, sessionBus: nil) { _ in }
        defer { source.stop() }
        #expect(source.session.id == "c2")
        #expect(source.session.type == "wayland")
        guard case .userSessions = source.session.lookup else {
            Issue.record("found by \(source.session.lookup)")
            return
        }
    }

    @Test("no bus is no-bus, a bus without logind is no-logind, logind without a session of ours is no-session")
    func typedErrors() throws {
        func code(_ body: () throws -> Void) -> DeviceError.Code? {
            do {
                try body()
                return nil
            } catch let error as DeviceError {
                return error.code
            } catch {
                return nil
            }
        }
        let missing = "unix:path=/tmp/protectedstore-no-such-bus-\(getpid())"
        #expect(code { _ = try SessionLockSource(systemBus: .address(missing), sessionBus: nil) { _ in } } == .noBus)

        let bare = try PrivateBus()
        #expect(code { _ = try SessionLockSource(systemBus: bare.bus, sessionBus: nil) { _ in } } == .noLogind)

        let logind = try MockLogind(processInSession: false, addSession: false)
        var message = ""
        #expect(
            code {
                do {
                    _ = try SessionLockSource(systemBus: logind.bus.bus, sessionBus: nil) { _ in }
                } catch let error as DeviceError {
                    message = error.message
                    throw error
                }
            } == .noSession)
        #expect(message.contains("process \(getpid())"))
    }

    @Test("LockedHint true and false are each reported once, re-read from logind; PrepareForSleep both ways")
    func reportsChanges() async throws {
        let logind = try MockLogind()
        let events = Recorder<SessionLockEvent>()
        let source = try SessionLockSource(systemBus: logind.bus.bus, sessionBus: nil) { events.record($0) }
        defer { source.stop() }
        try logind.setLockedHint(true)
        #expect(await eventually { events.all == [.locked(.lockedHint)] })
        #expect(source.status.lockedHint)
        try logind.setLockedHint(false)
        #expect(await eventually { events.all.count == 2 })
        try logind.prepareForSleep(true)
        try logind.prepareForSleep(false)
        #expect(await eventually { events.all.count == 4 })
        #expect(events.all == [.locked(.lockedHint), .unlocked(.lockedHint), .sleeping, .resumed])
        #expect(events.all.map(\.takesKeysAway) == [true, false, true, false])
    }

    @Test("logind's Lock signal is followed; the same signal sent by another connection than logind's is not")
    func trustsOnlyLogindsSignals() async throws {
        let logind = try MockLogind()
        let events = Recorder<SessionLockEvent>()
        let source = try SessionLockSource(systemBus: logind.bus.bus, sessionBus: nil) { events.record($0) }
        defer { source.stop() }
        // A spoof: the driver's own connection, not logind's, sends the session's Lock signal.
        try logind.run(
            """
            m = dbus.lowlevel.SignalMessage('\(logind.sessionPath)', 'org.freedesktop.login1.Session', 'Lock')
            bus.send_message(m)
            m = dbus.lowlevel.SignalMessage('/org/freedesktop/login1', 'org.freedesktop.login1.Manager', 'PrepareForSleep')
            m.append(True)
            bus.send_message(m)
            bus.flush()
            """)
        // Then logind's own: seen, and only after it the spoofs could have arrived — they were sent first.
        try logind.run("session('c1').Lock()")
        #expect(await eventually { !events.all.isEmpty })
        try await Task.sleep(for: .milliseconds(200))
        #expect(events.all == [.locked(.sessionSignal)])
    }

    @Test("stop joins the thread and closes every bus and its wake fd, while the source is still referenced")
    func stopLeavesNoFileDescriptor() throws {
        let logind = try MockLogind()
        let sessionBus = try PrivateBus()
        /// What an fd refers to (device, inode), or `nil` when it is closed. Compared, not just checked for being
        /// open: other tests running meanwhile may get the same number for a file of theirs.
        func identity(_ fd: Int32) -> [UInt64]? {
            var info = stat()
            guard fstat(fd, &info) == 0 else { return nil }
            return [UInt64(info.st_dev), UInt64(info.st_ino)]
        }
        var sources: [SessionLockSource] = []
        for _ in 0..<3 {
            let source = try SessionLockSource(systemBus: logind.bus.bus, sessionBus: sessionBus.bus) { _ in }
            // Two bus sockets, the eventfd and the event loop's epoll fd.
            let opened = source.descriptors.map { ($0, identity($0)) }
            #expect(opened.count == 4)
            #expect(opened.allSatisfy { $0.1 != nil })
            source.stop()
            sources.append(source)
            for (fd, was) in opened { #expect(identity(fd) != was, "fd \(fd) is still open after stop()") }
        }
        #expect(sources.allSatisfy { !$0.status.connected })
    }

    @Test("a lost system bus is reported as a lock")
    func lostBusLocks() async throws {
        let logind = try MockLogind()
        let events = Recorder<SessionLockEvent>()
        let source = try SessionLockSource(systemBus: logind.bus.bus, sessionBus: nil) { events.record($0) }
        defer { source.stop() }
        logind.stop()
        #expect(await eventually { events.all.contains { if case .busLost = $0 { true } else { false } } })
        #expect(events.all.allSatisfy { $0.takesKeysAway })
        #expect(!source.status.connected)
    }

    @Test("org.gnome.ScreenSaver ActiveChanged on the session bus is the fallback: true locks, false is reported")
    func screenSaverFallback() async throws {
        let logind = try MockLogind()
        let sessionBus = try PrivateBus()
        let saver = try MockService(template: "gnome_screensaver", name: "org.gnome.ScreenSaver", on: sessionBus, systemBus: false)
        defer { saver.stop() }
        let events = Recorder<SessionLockEvent>()
        let source = try SessionLockSource(systemBus: logind.bus.bus, sessionBus: sessionBus.bus) { events.record($0) }
        defer { source.stop() }
        #expect(source.status.screenSaver.contains("org.gnome.ScreenSaver (inactive)"))
        #expect(!source.status.lockedHintSeen)
        let screenSaver = "dbus.Interface(obj('/org/gnome/ScreenSaver', 'org.gnome.ScreenSaver'), 'org.gnome.ScreenSaver')"
        try MockControl.run(on: sessionBus, "\(screenSaver).SetActive(True)")
        #expect(await eventually { events.all == [.locked(.gnomeScreenSaver)] })
        #expect(source.status.isLocked)
        try MockControl.run(on: sessionBus, "\(screenSaver).SetActive(False)")
        #expect(await eventually { events.all == [.locked(.gnomeScreenSaver), .unlocked(.gnomeScreenSaver)] })
        #expect(!source.status.isLocked)
    }
}
