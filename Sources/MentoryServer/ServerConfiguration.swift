import MentoryWire

/// How the server listens and what it allows each connection.
public struct ServerConfiguration: Sendable {
    /// Where the listening socket comes from.
    public enum Listener: Sendable, Equatable {
        /// Bind a new socket at this path (and unlink it on shutdown).
        case path(String)
        /// Adopt a socket that is already bound and listening, e.g. one passed by systemd. Never unlinked.
        case activatedSocket(descriptor: Int32, path: String?)
    }

    /// Where the listening socket comes from.
    public var listener: Listener
    /// The permission bits of a socket file the server binds.
    public var socketMode: UInt16
    /// The largest frame payload accepted, in bytes; checked before anything is allocated.
    public var maxFrameLength: Int
    /// Bytes of events queued for one subscriber before it counts as overflowing and is sent a reset later.
    public var subscriberQueueBytes: Int
    /// Requests one connection may have in flight before the server stops reading from it.
    public var maxRequestsInFlight: Int
    /// Connections open at once; more are refused with an error.
    public var maxConnections: Int
    /// Connections one uid may have open at once; more are refused with an error.
    public var maxConnectionsPerUID: Int
    /// Seconds a new connection has to send its `Hello`.
    public var handshakeTimeoutSeconds: Int
    /// Bytes of replies and events one connection may have waiting for its socket before the server
    /// stops reading its requests; reading resumes once half of them have been written.
    public var maxOutboundBytes: Int
    /// Seconds a connection has on shutdown (or after a closing connection error) to take what is
    /// queued for it before it is closed regardless.
    public var shutdownDrainSeconds: Int
    /// Bytes of replies and events queued toward one uid's connections together, with the bytes reserved for
    /// replies and snapshots being computed, before none of that uid's connections is read until half has
    /// drained; events toward it are refused meanwhile (a reset follows). At least six frames.
    public var uidQueuedBytes: Int
    /// Requests one uid's connections may have in flight together before none of them is read.
    public var uidRequestsInFlight: Int
    /// ``uidQueuedBytes`` for every uid together: past it no connection is read until half has drained.
    public var totalQueuedBytes: Int

    public init(
        listener: Listener,
        socketMode: UInt16 = 0o660,
        maxFrameLength: Int = WireProtocol.defaultMaxFrameLength,
        subscriberQueueBytes: Int = 1 << 20,
        maxRequestsInFlight: Int = 128,
        maxConnections: Int = 1024,
        maxConnectionsPerUID: Int = 256,
        handshakeTimeoutSeconds: Int = 10,
        maxOutboundBytes: Int = 4 << 20,
        shutdownDrainSeconds: Int = 5,
        uidQueuedBytes: Int = 16 << 20,
        uidRequestsInFlight: Int = 256,
        totalQueuedBytes: Int = 64 << 20
    ) {
        self.listener = listener
        self.socketMode = socketMode
        self.maxFrameLength = maxFrameLength
        self.subscriberQueueBytes = subscriberQueueBytes
        self.maxRequestsInFlight = maxRequestsInFlight
        self.maxConnections = maxConnections
        self.maxConnectionsPerUID = maxConnectionsPerUID
        self.handshakeTimeoutSeconds = handshakeTimeoutSeconds
        self.maxOutboundBytes = maxOutboundBytes
        self.shutdownDrainSeconds = shutdownDrainSeconds
        self.uidQueuedBytes = uidQueuedBytes
        self.uidRequestsInFlight = uidRequestsInFlight
        self.totalQueuedBytes = totalQueuedBytes
    }

    /// The socket path clients use, when known.
    public var socketPath: String? {
        switch self.listener {
        case .path(let path): path
        case .activatedSocket(_, let path): path
        }
    }
}
