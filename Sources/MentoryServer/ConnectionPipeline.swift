import Logging
import MentoryEngine
import MentoryHandlerKit
import NIOCore

/// A connection on a NIO channel (``ConnectionHandler``), for in-process hosts of the request path that have no
/// listening socket: the allocation guard (`mentory-allocation-guard`) drives it through an in-memory channel.
/// The daemon serves its sockets with ``SocketConnection``; both run the same ``Connection``.
package enum ConnectionPipeline {
    /// The handler that speaks the protocol on one connection, with the ``Connection`` the server makes for each
    /// accepted socket. Add it on `engine`'s event loop (the engine's executor).
    package static func connectionHandler(
        engine: MentoryEngine,
        id: ConnectionID,
        configuration: ServerConfiguration,
        credentials: PeerCredentials?,
        logger: Logger,
        flusher: TickFlusher?
    ) -> any ChannelHandler {
        ConnectionHandler(
            engine: engine, id: id, configuration: configuration, credentials: credentials, logger: logger,
            flusher: flusher)
    }
}
