/// Every failure mentoryd reports, each with a stable wire code and a message a person can act on.
///
/// The numeric codes are part of the protocol (`ErrorCode` in `mentory.proto`) and never change meaning.
public enum MentoryError: Error, Equatable, Sendable {
    case unsupportedVersion(requested: UInt32, supported: UInt32)
    case handshakeRequired
    case malformedMessage(String)
    case frameTooLarge(length: Int, maximum: Int)
    case truncatedFrame
    case unknownNamespace(String)
    case unknownMethod(namespace: String, method: String)
    case invalidArgument(String)
    case notFound(String)
    case conflict(String)
    case permissionDenied(namespace: String, method: String)
    case duplicateRequestID(UInt64)
    case tooManyRequests(limit: Int)
    case storageFailure(String)
    case shuttingDown
    case `internal`(String)
    case alreadyHandshaken
    case tooManyConnections(String)
    case handshakeTimeout(seconds: Int)
    case unavailable(String)
    case deadlineExceeded(namespace: String, method: String, milliseconds: Int)
    /// A call a handler or plugin made on a client's behalf (`call`, e.g. `moods -> diary.list`) was refused:
    /// that client's uid was at its budget (`limits.uidRequestsInFlight`, or its queued bytes). Nested calls
    /// never wait for room, since the call making them holds room of its own.
    case callerOverBudget(call: String, uid: UInt32?)
    /// A call a handler or plugin made on a client's behalf was refused by the access rules: the client may not
    /// call `namespace.method` itself. `chain` is the way the call came, e.g. `["moods"]` or
    /// `["streaks", "moods"]`; its last namespace made the call. Reason ``Reason/deniedOnBehalf``.
    case deniedOnBehalf(namespace: String, method: String, chain: [String])
    /// `plugin.register` for a namespace no `plugins.NAME` section declares (`declared`: the plugins that are,
    /// as "name (namespace)"). Reason ``Reason/pluginNotDeclared``: a plugin waits for a reload that declares it.
    case pluginNotDeclared(namespace: String, declared: [String])

    /// The stable wire code.
    public var code: Mentory_V1_ErrorCode {
        switch self {
        case .unsupportedVersion: .unsupportedVersion
        case .handshakeRequired: .handshakeRequired
        case .malformedMessage: .malformedMessage
        case .frameTooLarge: .frameTooLarge
        case .truncatedFrame: .truncatedFrame
        case .unknownNamespace: .unknownNamespace
        case .unknownMethod: .unknownMethod
        case .invalidArgument: .invalidArgument
        case .notFound: .notFound
        case .conflict: .conflict
        case .permissionDenied: .permissionDenied
        case .duplicateRequestID: .duplicateRequestID
        case .tooManyRequests: .tooManyRequests
        case .storageFailure: .storageFailure
        case .shuttingDown: .shuttingDown
        case .internal: .internal
        case .alreadyHandshaken: .alreadyHandshaken
        case .tooManyConnections: .tooManyConnections
        case .handshakeTimeout: .handshakeTimeout
        case .unavailable: .unavailable
        case .deadlineExceeded: .deadlineExceeded
        case .callerOverBudget: .tooManyRequests
        case .deniedOnBehalf: .permissionDenied
        case .pluginNotDeclared: .permissionDenied
        }
    }

    /// A sentence saying what went wrong and what to do about it.
    public var message: String {
        switch self {
        case .unsupportedVersion(let requested, let supported):
            "protocol version \(requested) is not supported; this daemon speaks version \(supported)"
        case .handshakeRequired:
            "send Hello before any request"
        case .malformedMessage(let reason):
            "the frame does not hold a valid Envelope (\(reason))"
        case .frameTooLarge(let length, let maximum):
            "a frame of \(length) bytes exceeds the limit of \(maximum) bytes"
        case .truncatedFrame:
            "the connection ended in the middle of a frame"
        case .unknownNamespace(let namespace):
            "no handler is registered for namespace '\(namespace)'"
        case .unknownMethod(let namespace, let method):
            "namespace '\(namespace)' has no method '\(method)'"
        case .invalidArgument(let reason):
            reason
        case .notFound(let what):
            "\(what) was not found"
        case .conflict(let reason):
            reason
        case .permissionDenied(let namespace, let method):
            "permission denied: you may not call \(namespace).\(method)"
        case .duplicateRequestID(let id):
            "request id \(id) is already in flight on this connection; use a fresh id"
        case .tooManyRequests(let limit):
            "more than \(limit) requests are in flight on this connection; wait for replies"
        case .storageFailure(let reason):
            "storage failed: \(reason)"
        case .shuttingDown:
            "the daemon is shutting down; reconnect after it restarts"
        case .internal(let reason):
            "internal error: \(reason)"
        case .alreadyHandshaken:
            "the handshake was already done on this connection"
        case .tooManyConnections(let reason):
            reason
        case .handshakeTimeout(let seconds):
            "no Hello arrived within \(seconds) seconds"
        case .unavailable(let reason):
            reason
        case .deadlineExceeded(let namespace, let method, let milliseconds):
            "\(namespace).\(method) was not answered within its deadline of \(milliseconds) ms"
        case .callerOverBudget(let call, let uid):
            "\(call) was refused: it is made on behalf of a caller"
                + (uid.map { " (uid \($0))" } ?? "")
                + " whose uid is at its budget (limits.uidRequestsInFlight requests in flight, or"
                + " limits.uidQueuedBytes queued); retry once its other requests are answered, or raise the limits"
        case .deniedOnBehalf(let namespace, let method, let chain):
            "permission denied: you may not call \(namespace).\(method), which was called on your behalf by"
                + " \(chain.last ?? "a handler") (\((chain + ["\(namespace).\(method)"]).joined(separator: " -> ")));"
                + " the access rules that refuse it to you refuse it to what you call"
        case .pluginNotDeclared(let namespace, let declared):
            "permission denied: you may not call plugin.register(\(namespace)): no plugin declares namespace"
                + " '\(namespace)' under plugins.<name>.namespace (declared: "
                + (declared.isEmpty ? "none" : declared.joined(separator: ", "))
                + "); add a plugins section for it and reload mentoryd: the plugin registers then"
        }
    }

    /// Stable codes for failures the daemon itself reports, in an error's `reason` (a handler's own reasons are
    /// under its namespace, e.g. `diary.entry_conflict`).
    public enum Reason {
        /// ``MentoryError/deniedOnBehalf(namespace:method:chain:)``.
        public static let deniedOnBehalf = "session.denied_on_behalf"
        /// ``MentoryError/pluginNotDeclared(namespace:declared:)``.
        public static let pluginNotDeclared = "plugin.not_declared"
        /// Every reason the daemon reports itself; docs/PROTOCOL.md lists each one (a test checks).
        public static let all = [deniedOnBehalf, pluginNotDeclared]
    }

    /// The error's stable reason code (``Reason``), or empty when its wire code says all there is.
    public var reason: String {
        switch self {
        case .deniedOnBehalf: Reason.deniedOnBehalf
        case .pluginNotDeclared: Reason.pluginNotDeclared
        default: ""
        }
    }

    /// The error as it travels on the wire.
    public var wireError: Mentory_V1_Error {
        var error = Mentory_V1_Error(code: self.code, message: self.message)
        error.reason = self.reason
        return error
    }
}

extension MentoryError: CustomStringConvertible {
    public var description: String { self.message }
}
