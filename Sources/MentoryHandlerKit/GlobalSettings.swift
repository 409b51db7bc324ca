import Logging
import MentoryWire

/// The daemon-wide settings a handler may read: a small read-only copy, not the daemon's configuration.
///
/// A handler gets it in ``HandlerSetup/settings`` (to open and close) and in ``HandlerContext/settings``
/// (every call). The settings that reload live (``logLevel``) are refreshed by a reload before the
/// handler's ``MentoryHandler/reload(context:)`` runs; the others are fixed until the daemon restarts.
/// The handler's own section, `handlers.<namespace>`, is ``HandlerSetup/config`` and ``HandlerContext/config``.
public struct GlobalSettings: Sendable, Equatable {
    /// Whose mentoryd this is.
    public enum InstanceKind: String, Sendable, Equatable {
        /// One person's daemon, running as that person (`systemctl --user`).
        case user
        /// The device's daemon, running as root or the `mentory` account.
        case system
    }

    /// Whether this is a user or the system instance.
    public var instanceKind: InstanceKind
    /// The uid the daemon runs as; `session.status` reports it too.
    public var daemonUID: UInt32
    /// The daemon's state directory (`state.directory`), where a handler may keep files of its own (under
    /// a name starting with its namespace); empty when the daemon has none (tests).
    public var stateDirectory: String
    /// The largest frame payload in bytes (`limits.maxFrameLength`).
    public var maxFrameLength: Int
    /// The largest reply body that fits one frame; a handler building long replies pages them under it.
    public var maxReplyBytes: Int
    /// How long a request may take when it names no shorter deadline (`limits.requestTimeoutMilliseconds`).
    public var requestTimeout: Duration
    /// The least severe level the daemon logs (`log.level`); a reload refreshes it.
    public var logLevel: Logger.Level

    /// Settings as the daemon's defaults are; the host passes the real ones.
    public init(
        instanceKind: InstanceKind = .user,
        daemonUID: UInt32 = 0,
        stateDirectory: String = "",
        maxFrameLength: Int = WireProtocol.defaultMaxFrameLength,
        maxReplyBytes: Int = ReplyBudget.defaultBodyBytes,
        requestTimeout: Duration = .seconds(30),
        logLevel: Logger.Level = .info
    ) {
        self.instanceKind = instanceKind
        self.daemonUID = daemonUID
        self.stateDirectory = stateDirectory
        self.maxFrameLength = maxFrameLength
        self.maxReplyBytes = maxReplyBytes
        self.requestTimeout = requestTimeout
        self.logLevel = logLevel
    }
}
