import ProtectedData
#if canImport(Glibc)
import Glibc
#endif

/// The logind session a lock source follows, and how it was found.
public struct LogindSession: Sendable, Hashable {
    /// How a session was found.
    public enum Lookup: Sendable, Hashable, CustomStringConvertible {
        /// `GetSessionByPID` of this process, which runs inside the session.
        ///
        /// That is the case for a terminal or a desktop app.
        case callerProcess(pid: Int32)
        /// The process is in no session, so the user's display session is followed.
        ///
        /// A systemd user service is in none. The display session is logind's `User.Display`. `reason` says why the
        /// process's own session was not found.
        case userDisplay(uid: UInt32, reason: String)
        /// As ``userDisplay(uid:reason:)``, but the user has no display session.
        ///
        /// The user's sessions from `ListSessions` are followed, a graphical active one first.
        case userSessions(uid: UInt32, reason: String)

        /// How, in words.
        public var description: String {
            switch self {
            case .callerProcess(let pid): "this process's session (GetSessionByPID \(pid))"
            case .userDisplay(let uid, let reason):
                "the display session of user \(uid) (User.Display; this process is in no session: \(reason))"
            case .userSessions(let uid, let reason):
                "a session of user \(uid) from ListSessions (no display session; this process is in no session: \(reason))"
            }
        }
    }

    /// logind's session id (`2`, `c1`).
    public let id: String
    /// Its object path (`/org/freedesktop/login1/session/_32`).
    public let path: String
    /// Its type, such as `x11`, `wayland` or `tty`.
    public let type: String
    /// How it was found.
    public let lookup: Lookup

    static let service = "org.freedesktop.login1"
    static let managerPath = "/org/freedesktop/login1"
    static let managerInterface = "org.freedesktop.login1.Manager"
    static let sessionInterface = "org.freedesktop.login1.Session"
    static let userInterface = "org.freedesktop.login1.User"

    /// Finds the session of this process, or else its user's display session, or else one of its user's
    /// sessions (graphical and active first).
    ///
    /// - Throws: `DeviceError.Code.noLogind` when nobody owns `org.freedesktop.login1`;
    ///   `DeviceError.Code.noSession` when logind knows no session of the process nor of its user.
    static func find(on connection: BusConnection) throws(DeviceError) -> LogindSession {
        let pid = getpid()
        let uid = getuid()
        let reason: String
        do throws(BusFailure) {
            let path = try connection.call(service, managerPath, managerInterface, "GetSessionByPID", [.uint32(UInt32(pid))])
                .readObjectPath()
            return try describe(path, lookup: .callerProcess(pid: pid), on: connection)
        } catch let failure {
            if failure.isServiceMissing { throw DeviceError.noLogind(connection.bus, failure) }
            reason = failure.description
        }
        // The user's display session: the one a desktop shows (logind picks the graphical one).
        do throws(BusFailure) {
            let userPath = try connection.call(service, managerPath, managerInterface, "GetUser", [.uint32(uid)]).readObjectPath()
            let display = try connection.property(service, userPath, userInterface, "Display", type: "(so)")
            guard try display.enter(BusType.structure, "so") else { throw BusFailure.local(-EBADMSG) }
            _ = try display.readString()
            let sessionPath = try display.readObjectPath()
            if sessionPath != "/" {
                return try describe(sessionPath, lookup: .userDisplay(uid: uid, reason: reason), on: connection)
            }
        } catch let failure {
            if failure.isServiceMissing { throw DeviceError.noLogind(connection.bus, failure) }
            if failure.name != "org.freedesktop.login1.NoSuchUser" {
                throw DeviceError.noSession(uid: uid, pid: pid, "GetUser(\(uid)) failed: \(failure)")
            }
            throw DeviceError.noSession(uid: uid, pid: pid, "this process is in no session (\(reason)) and user \(uid) is not logged in")
        }
        // No display session: the user's sessions, a graphical active one first.
        var candidates: [(session: LogindSession, rank: Int)] = []
        do throws(BusFailure) {
            let list = try connection.call(service, managerPath, managerInterface, "ListSessions")
            guard try list.enter(BusType.array, "(susso)") else { throw BusFailure.local(-EBADMSG) }
            var paths: [String] = []
            while try list.enter(BusType.structure, "susso") {
                _ = try list.readString()
                let owner = try list.readUInt32()
                _ = try list.readString()
                _ = try list.readString()
                let path = try list.readObjectPath()
                try list.exit()
                if owner == uid { paths.append(path) }
            }
            for path in paths {
                let session = try describe(path, lookup: .userSessions(uid: uid, reason: reason), on: connection)
                let active = (try? connection.boolProperty(service, path, sessionInterface, "Active")) ?? false
                let graphical = ["x11", "wayland", "mir"].contains(session.type)
                candidates.append((session, (graphical ? 2 : 0) + (active ? 1 : 0)))
            }
        } catch let failure {
            if failure.isServiceMissing { throw DeviceError.noLogind(connection.bus, failure) }
            throw DeviceError.noSession(uid: uid, pid: pid, "ListSessions failed: \(failure)")
        }
        // The best rank; among equals, the first logind listed.
        guard let best = candidates.enumerated().max(by: { ($0.element.rank, -$0.offset) < ($1.element.rank, -$1.offset) }) else {
            throw DeviceError.noSession(uid: uid, pid: pid, "this process is in no session (\(reason)) and user \(uid) has none")
        }
        return best.element.session
    }

    /// The session at `path`, with its id and type read from logind.
    private static func describe(_ path: String, lookup: Lookup, on connection: BusConnection) throws(BusFailure) -> LogindSession {
        let id = try connection.stringProperty(service, path, sessionInterface, "Id")
        let type = (try? connection.stringProperty(service, path, sessionInterface, "Type")) ?? "unknown"
        return LogindSession(id: id, path: path, type: type, lookup: lookup)
    }
}
