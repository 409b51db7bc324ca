#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import MentoryWire

/// Why a client call failed.
public enum MentoryClientError: Error, Sendable, Equatable {
    /// No daemon accepted the connection at `path`.
    case cannotConnect(path: String, reason: String)
    /// The daemon answered with an error; `code` is one of `Mentory_V1_ErrorCode`, and `reason` the
    /// namespace's own stable code for the failure (e.g. `diary.entry_conflict`), empty when it has none.
    case remote(code: UInt32, message: String, reason: String = "")
    /// The connection closed before the answer arrived.
    case connectionClosed(reason: String)
    /// The daemon sent something this client cannot read.
    case malformedReply(String)
    /// No answer arrived within the timeout.
    case timedOut(seconds: Double)
    /// The calling task was cancelled before the answer arrived; the answer will be ignored.
    case cancelled
    /// The socket at `path` failed a ``SocketTrust`` check (its directory or the serving process);
    /// `reason` says which and what to do. Nothing was sent to it.
    case untrustedSocket(path: String, reason: String)
    /// More than `limit` events waited unread in this client's event buffer. The buffer's events are
    /// still delivered, then ``MentoryClient/events`` ends and the connection's subscriptions are
    /// dropped: resubscribe (on a new connection) from the last event processed to get a replay or a reset.
    case eventBufferOverflow(limit: Int)

    /// The daemon's error code, when the daemon reported one.
    public var remoteCode: Mentory_V1_ErrorCode? {
        guard case .remote(let code, _, _) = self else { return nil }
        return Mentory_V1_ErrorCode(rawValue: Int(code))
    }

    init(_ error: Mentory_V1_Error) {
        self = .remote(code: error.code, message: error.message, reason: error.reason)
    }

    /// The daemon's error as it sent it, when it reported one.
    public var remoteError: Mentory_V1_Error? {
        guard case .remote(let code, let message, let reason) = self else { return nil }
        var error = Mentory_V1_Error()
        error.code = code
        error.message = message
        error.reason = reason
        return error
    }
}

extension MentoryClientError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .cannotConnect(let path, let reason):
            reason.hasPrefix(UserInstance.notRunningPrefix)
                // Says already which sockets were tried and what to do.
                ? "cannot connect to mentoryd at \(path): \(reason)."
                : "cannot connect to mentoryd at \(path): \(reason). \(Self.connectionHint(path: path, reason: reason))"
        case .remote(let code, let message, let reason):
            reason.isEmpty ? "\(message) (error \(code))" : "\(message) (error \(code), reason \(reason))"
        case .connectionClosed(let reason):
            "the connection to mentoryd closed: \(reason)"
        case .malformedReply(let reason):
            "mentoryd sent a reply this client cannot read: \(reason)"
        case .timedOut(let seconds):
            "mentoryd did not answer within \(seconds) seconds"
        case .cancelled:
            "the call was cancelled"
        case .untrustedSocket(let path, let reason):
            "refusing the socket \(path): \(reason)."
        case .eventBufferOverflow(let limit):
            "more than \(limit) events were left unread; the subscription must be resumed on a new connection"
        }
    }
}

extension MentoryClientError {
    /// What to do about a failed connect, by the system's error in `reason` (`… (errno: 13)`, as both
    /// connect paths word it): a socket the caller may not use is not a daemon that is down. When
    /// `MENTORY_SOCKET` names the socket, it says so instead of suggesting to set it.
    static func connectionHint(path: String, reason: String) -> String {
        let source: String
        if let named = getenv(SocketLocator.socketEnvironmentKey), String(cString: named) == path {
            source = "(MENTORY_SOCKET names this socket.)"
        } else {
            source = "To use another socket, pass --socket or set MENTORY_SOCKET."
        }
        switch Self.errnoCode(in: reason) {
        case EACCES, EPERM:
            return "Permission denied on the socket: your user may not connect to it. Connect as its owner or as a "
                + "member of its group (ls -l \(path) shows them; the system daemon's group is mentory, for the "
                + "people who share its diary: sudo usermod -aG mentory NAME, then log in again; your own diary is "
                + "your user instance, systemctl --user start mentoryd.socket). \(source)"
        case ECONNREFUSED:
            return "Nothing listens on the socket: the daemon is not running, or it is restarting. \(source)"
        case ENOENT:
            return "No socket is there: the daemon is not running, or it listens elsewhere. \(source)"
        default:
            return "Is the daemon running? \(source)"
        }
    }

    /// The number after the last `(errno: ` in `reason`, if any.
    private static func errnoCode(in reason: String) -> Int32? {
        guard let marker = reason.ranges(of: "(errno: ").last else { return nil }
        return Int32(String(reason[marker.upperBound...].prefix { $0.isNumber }))
    }
}
