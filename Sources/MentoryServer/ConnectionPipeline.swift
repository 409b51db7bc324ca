import Logging
import MentoryEngine
import MentoryHandlerKit
import NIOCore

/// The handler the server puts in each connection's pipeline, for in-process hosts of the request path
/// that have no listening socket: the allocation guard (`mentory-allocation-guard`) drives it through an
/// in-memory channel.
package enum ConnectionPipeline {
    /// The handler that speaks the protocol on one connection, as ``MentoryServer`` makes it for each
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
