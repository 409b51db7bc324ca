import NIOCore
import NIOPosix

// The NIO floor: NIOPosix's ServerBootstrap on one event loop thread, with the options mentoryd's had while it served
// on NIO (until 2026-11-29): backlog 512, autoRead. One channel handler per connection answers its frames
// (FloorProtocol). What is left is NIO's channel machinery (read, pipeline, write, flush, selector) and a memcpy per
// reply. The replies of one read go into one buffer, written and flushed once at channelReadComplete, as
// NIOEchoServer does (`--flush read`, the default); `--flush tick` instead flushes every connection's buffer once
// at the end of the event loop's tick (one task per tick, as mentoryd's TickFlusher and Redis's beforeSleep do).
// Each subscriber's events of one publisher read are written and flushed once, at the publisher's
// channelReadComplete.

/// The topic and the connections waiting for their flush; used on the event loop only.
final class Hub {
    let topic = FloorTopic<FloorHandler>()
    /// `--flush tick`: flush at the end of the tick instead of at each channelReadComplete.
    var flushAtTickEnd = false
    /// The connections with replies waiting for the end of the tick.
    var dirty: [FloorHandler] = []
    var flushScheduled = false

    /// Hands `handler`'s replies to the socket now, or at the end of the tick.
    func flush(_ handler: FloorHandler, bound: NIOLoopBound<Hub>) {
        guard self.flushAtTickEnd else {
            handler.flushOut()
            return
        }
        self.dirty.append(handler)
        if !self.flushScheduled {
            self.flushScheduled = true
            bound.eventLoop.execute { bound.value.flushAll() }
        }
    }

    private func flushAll() {
        self.flushScheduled = false
        for handler in self.dirty {
            handler.flushOut()
        }
        self.dirty.removeAll(keepingCapacity: true)
    }
}

/// Splits frames and answers them with the pre-encoded replies.
final class FloorHandler: ChannelInboundHandler, FloorPeer {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let hub: Hub
    private let bound: NIOLoopBound<Hub>
    /// A partial frame carried to the next read.
    private var cumulation: ByteBuffer?
    /// The replies of the current read (and the events of other connections' reads for a subscriber).
    var out: ByteBuffer
    var subscribed = false
    /// Subscribers given events during this read, flushed at channelReadComplete.
    private var touchedSubscribers: [FloorHandler] = []
    private var context: ChannelHandlerContext?

    init(hub: NIOLoopBound<Hub>, allocator: ByteBufferAllocator) {
        self.hub = hub.value
        self.bound = hub
        self.out = allocator.buffer(capacity: 4096)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        if self.subscribed {
            self.hub.topic.subscribers.removeAll { $0 === self }
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        if var partial = self.cumulation {
            self.cumulation = nil
            partial.writeBuffer(&buffer)
            buffer = partial
        }
        FloorProtocol.answerFrames(in: &buffer, for: self, topic: self.hub.topic)
        if buffer.readableBytes > 0 {
            self.cumulation = buffer
        }
    }

    func touched(_ subscriber: FloorHandler) {
        // An empty `out` is not yet listed for a flush this tick (nor in Hub.dirty).
        if subscriber.out.readableBytes == 0 { self.touchedSubscribers.append(subscriber) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.hub.flush(self, bound: self.bound)
        for subscriber in self.touchedSubscribers {
            self.hub.flush(subscriber, bound: self.bound)
        }
        self.touchedSubscribers.removeAll(keepingCapacity: true)
    }

    /// Writes and flushes what `out` holds, once.
    func flushOut() {
        guard self.out.readableBytes > 0, let context = self.context else { return }
        context.writeAndFlush(Self.wrapOutboundOut(self.out), promise: nil)
        // NIO has written it (or holds its own reference): clearing reuses the storage when unique.
        self.out.clear()
    }
}

/// Serves `path` on one NIO event loop thread until killed.
func runNIOFloor(path: String, flushAtTickEnd: Bool) throws {
    // One thread, as mentoryd's event loop (MentoryDaemonKit's Daemon).
    let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
    let loop = group.next()
    let hub = try loop.submit {
        let hub = Hub()
        hub.flushAtTickEnd = flushAtTickEnd
        return NIOLoopBound(hub, eventLoop: loop)
    }.wait()
    let channel = try ServerBootstrap(group: loop)
        .serverChannelOption(.backlog, value: 512)
        .childChannelOption(.autoRead, value: true)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let handler = FloorHandler(hub: hub, allocator: channel.allocator)
                try channel.pipeline.syncOperations.addHandler(handler)
            }
        }
        .bind(unixDomainSocketPath: path)
        .wait()
    try channel.closeFuture.wait()
}
