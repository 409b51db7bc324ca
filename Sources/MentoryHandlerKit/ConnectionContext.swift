/// Identifies one client connection for the lifetime of the daemon.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    /// The raw number; unique within one daemon run.
    public var rawValue: UInt64

    public init(_ rawValue: UInt64) {
        self.rawValue = rawValue
    }

    public var description: String { "#\(self.rawValue)" }
}

/// The credentials the kernel reported for a connection's peer (`SO_PEERCRED`).
public struct PeerCredentials: Hashable, Sendable, CustomStringConvertible {
    public var pid: Int32
    public var uid: UInt32
    /// The primary group.
    public var gid: UInt32
    /// Supplementary groups, as `/proc/PID/status` listed them when the peer connected.
    public var groups: [UInt32]

    public init(pid: Int32, uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    /// Whether the peer is in `group`, as primary or supplementary group.
    public func isMember(of group: UInt32) -> Bool {
        self.gid == group || self.groups.contains(group)
    }

    public var description: String { "pid \(self.pid) uid \(self.uid) gid \(self.gid)" }
}

/// What the engine knows about a connection: who it is and where its events go.
public struct ConnectionContext: Sendable {
    public var id: ConnectionID
    public var clientName: String
    public var credentials: PeerCredentials?

    public init(id: ConnectionID, clientName: String, credentials: PeerCredentials? = nil) {
        self.id = id
        self.clientName = clientName
        self.credentials = credentials
    }
}
