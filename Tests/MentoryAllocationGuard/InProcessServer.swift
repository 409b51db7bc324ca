import Foundation
import Logging
import MentoryEngine
import MentoryHandlerKit
import MentoryReachability
import MentoryServer
import MentoryWire
import MentoryWireFixtures
import NIOCore
import NIOEmbedded
import SwiftProtobuf

/// A namespace for the fan-out measurement: one method that publishes one small event.
enum TickSchema: NamespaceSchema {
    static let name = "tick"
    static let version: UInt32 = 1
    static let publish = MethodSchema<TickSchema, Mentory_V1_Empty, Mentory_V1_Empty>(name: "publish")
    static let ticks = TopicSchema<TickSchema, Mentory_V1_Hello, Mentory_V1_Hello>(
        name: "tick", reads: ["tick.publish"])
    static let methods: [MethodInfo] = [publish.info]
    static let topics: [TopicInfo] = [ticks.info]
    static var fileDescriptors: SchemaDescriptors { MentorySchema.fileDescriptors }
}

/// Publishes one small event per `tick.publish`, answered at once (no suspension).
struct TickHandler: MentoryHandler {
    typealias Namespace = TickSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.publish) { _, _, context in
            var body = Mentory_V1_Hello()
            body.clientName = "tick"
            context.publish(body, on: Namespace.ticks)
            return Mentory_V1_Empty()
        }
        routes.snapshot(Namespace.ticks) { _ in Mentory_V1_Hello() }
    }
}

/// The socket's side of the pipeline: takes every frame the connection writes at once (the peer reads
/// everything), keeps a count and the last frame, and never lets a write pile up in the channel.
final class FrameSink: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer

    var frames = 0
    var flushes = 0
    var last: ByteBuffer?
    /// Whether ``last`` is kept. Off while allocations are counted: keeping it would keep the storage of what the
    /// connection wrote, which a socket's transport lets go of once the kernel has taken it (the connection reuses a
    /// small buffer of its own once it is let go).
    var keepsLast = true

    /// Counts the frames in each write (the connection coalesces a tick's frames into one write).
    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var buffer = Self.unwrapOutboundIn(data)
        while let length = buffer.getInteger(at: buffer.readerIndex, as: UInt32.self),
            let frame = buffer.readSlice(length: WireProtocol.lengthPrefixSize + Int(length))
        {
            self.frames += 1
            if self.keepsLast { self.last = frame }
        }
        promise?.succeed(())
    }

    func flush(context: ChannelHandlerContext) {
        self.flushes += 1
    }
}

/// The daemon's request path in process: the real engine and real `ConnectionHandler` pipelines, on one
/// `NIOAsyncTestingEventLoop` that is the engine's executor, as one event loop is in the daemon.
struct InProcessServer {
    let loop: NIOAsyncTestingEventLoop
    let engine: MentoryEngine
    /// The end-of-tick flush the connections share, as the daemon's connections do.
    let flusher: NIOLoopBoundBox<TickFlusher>
    private var nextID: UInt64 = 1

    /// Events kept per topic: small, so the warm-up fills the ring and the measured events replace
    /// old ones, as in a daemon that has run a while.
    static let eventRingCapacity = 64

    init() async throws {
        let loop = NIOAsyncTestingEventLoop()
        let engine = MentoryEngine(
            configuration: .init(serverVersion: "test", eventRingCapacity: Self.eventRingCapacity, daemonUID: 1000),
            executor: loop.executor)
        try await engine.register(TickHandler())
        try await engine.register(ReachabilityHandler())
        self.loop = loop
        self.engine = engine
        self.flusher = NIOLoopBoundBox.makeBoxSendingValue(
            TickFlusher(eventLoop: loop), as: TickFlusher.self, eventLoop: loop)
    }

    /// A connection that has done its handshake.
    mutating func connect() async throws -> Connection {
        let configuration = ServerConfiguration(listener: .path("/unused"))
        let id = ConnectionID(self.nextID)
        self.nextID += 1
        let channel = NIOAsyncTestingChannel(loop: self.loop)
        let engine = self.engine
        let flusher = self.flusher
        try await self.loop.executeInContext {
            try channel.pipeline.syncOperations.addHandlers([
                FrameSink(),
                ConnectionPipeline.connectionHandler(
                    engine: engine,
                    id: id,
                    configuration: configuration,
                    credentials: PeerCredentials(pid: 1, uid: 1000, gid: 1000),
                    logger: Logger(label: "test"),
                    flusher: flusher.value
                ),
            ])
        }
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
        let connection = Connection(channel: channel)
        try await connection.send(helloEnvelope(clientName: "allocations"))
        let welcome = try await connection.lastFrame()
        guard case .welcome = welcome?.kind else {
            throw SetupError("expected a Welcome, got \(String(describing: welcome))")
        }
        return connection
    }
}

/// One connection's channel: [FrameSink, frame decoder, ConnectionHandler].
struct Connection {
    let channel: NIOAsyncTestingChannel

    var loop: NIOAsyncTestingEventLoop { self.channel.testingEventLoop }

    /// One read: `frame` (length prefix included) into the pipeline, then read-complete. Call on the loop.
    func read(_ frame: ByteBuffer) {
        let pipeline = self.channel.pipeline.syncOperations
        pipeline.fireChannelRead(NIOAny(frame))
        pipeline.fireChannelReadComplete()
    }

    /// Sends `envelope` as one read and runs the loop.
    func send(_ envelope: Mentory_V1_Envelope) async throws {
        try await self.send(Self.frame(envelope))
    }

    /// Sends `frame` as one read and runs the loop.
    func send(_ frame: ByteBuffer) async throws {
        let connection = self
        try await self.loop.executeInContext { connection.read(frame) }
        await self.loop.run()
    }

    /// Whether the connection's sink keeps the last frame written (``FrameSink/keepsLast``).
    func keepLast(_ keeps: Bool) async throws {
        let channel = self.channel
        try await self.loop.executeInContext {
            let sink = try channel.pipeline.syncOperations.handler(type: FrameSink.self)
            sink.keepsLast = keeps
            if !keeps { sink.last = nil }
        }
    }

    /// Closes the channel (the engine detaches the connection).
    func close() async throws {
        _ = try await self.channel.finish()
        await self.loop.run()
    }

    /// The frames the connection has written so far, and the last one.
    func sink() async throws -> (frames: Int, last: Mentory_V1_Envelope?) {
        let channel = self.channel
        let (frames, last) = try await self.loop.executeInContext {
            let sink = try channel.pipeline.syncOperations.handler(type: FrameSink.self)
            return (sink.frames, sink.last)
        }
        guard var last, let length = last.readInteger(as: UInt32.self),
            let payload = last.readSlice(length: Int(length))
        else { return (frames, nil) }
        return (frames, try Mentory_V1_Envelope(frame: payload))
    }

    func lastFrame() async throws -> Mentory_V1_Envelope? {
        try await self.sink().last
    }

    /// Runs the loop until the connection has written at least `count` frames (for work that finishes in
    /// a task), for at most a generous 30 seconds; returns as soon as it has.
    func waitForFrames(_ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while try await self.sink().frames < count {
            guard ContinuousClock.now < deadline else { throw SetupError("fewer than \(count) frames in 30 s") }
            await self.loop.run()
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    static func frame(_ envelope: Mentory_V1_Envelope) -> ByteBuffer {
        var buffer = ByteBuffer()
        buffer.writeFrame(envelope)
        return buffer
    }

    static func request(_ id: UInt64, _ namespace: String, _ method: String, _ body: Data = Data())
        -> Mentory_V1_Envelope
    {
        requestEnvelope(id: id, namespace, method, body)
    }
}

struct SetupError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
