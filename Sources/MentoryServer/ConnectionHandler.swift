import Logging
import MentoryEngine
import MentoryHandlerKit
import NIOCore

/// A ``Connection`` on a NIO channel: the last handler of the channel's pipeline, which reports each NIO callback
/// to the connection and moves its bytes through the channel (its ``ConnectionTransport``).
///
/// The channel's write buffer water marks are set so that writability says whether the kernel took every byte
/// flushed (``OutboundFrameBuffer/everythingTaken``).
final class ConnectionHandler: ChannelDuplexHandler, ConnectionTransport {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    /// The protocol logic this handler drives.
    let connection: Connection
    private var context: ChannelHandlerContext?

    init(
        engine: MentoryEngine,
        id: ConnectionID,
        configuration: ServerConfiguration,
        credentials: PeerCredentials?,
        logger: Logger,
        metrics: ServerMetrics? = nil,
        flusher: TickFlusher? = nil,
        budgets: UIDBudgets? = nil
    ) {
        self.connection = Connection(
            engine: engine, id: id, configuration: configuration, credentials: credentials, logger: logger,
            metrics: metrics, flusher: flusher, budgets: budgets)
    }

    /// Tells the peer why, then closes the connection once that is written or the drain deadline passes.
    func failConnection(_ error: MentoryError) {
        self.connection.failConnection(error)
    }

    // MARK: ConnectionTransport

    var eventLoop: any EventLoop { self.context!.eventLoop }

    var allocator: ByteBufferAllocator { self.context!.channel.allocator }

    func write(_ frames: ByteBuffer, promise: EventLoopPromise<Void>?) {
        self.context?.write(NIOAny(frames), promise: promise)
    }

    /// Writability says whether the kernel took it all (see ``channelWritabilityChanged(context:)``).
    func flush(_ frames: ByteBuffer?) -> Bool {
        guard let context = self.context else { return false }
        if let frames {
            context.writeAndFlush(NIOAny(frames), promise: nil)
        } else {
            context.flush()
        }
        return context.channel.isWritable
    }

    func read() {
        self.context?.read()
    }

    func close() {
        self.context?.close(promise: nil)
    }

    // MARK: ChannelDuplexHandler

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        try? context.channel.syncOptions?.setOption(.writeBufferWaterMark, value: OutboundFrameBuffer.everythingTaken)
        self.connection.attach(to: self, isActive: context.channel.isActive)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        self.connection.removed()
    }

    func channelActive(context: ChannelHandlerContext) {
        self.connection.activated()
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        // What was flushed and not taken will not be: the channel failed those writes.
        self.connection.inactive()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.connection.received(self.unwrapInboundIn(data))  // The instance form: the static one is not specialized.
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // Not passed on: this is the pipeline's last handler, and the tail does nothing with it (as with writability).
        self.connection.readCompleted()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event as? ChannelEvent == .some(.inputClosed) { self.connection.inputClosed() }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.connection.errorCaught(error)
    }

    func read(context: ChannelHandlerContext) {
        if self.connection.readRequested() { context.read() }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.connection.flushedBytesTaken() }
    }
}
