import Foundation
import Logging
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import MentoryWireFixtures
import NIOCore
import NIOEmbedded
import SwiftProtobuf
import Testing

@testable import MentoryServer

/// Sits next to the socket: counts writes, flushes and reads, and can hold writes back like a peer
/// that does not read, until released.
final class PeerSimulator: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer

    var writes = 0
    var flushes = 0
    var reads = 0
    var holding = false
    private var held: [(NIOAny, EventLoopPromise<Void>?)] = []
    private var context: ChannelHandlerContext?

    /// The frames in the writes held so far (a write may carry several).
    var heldFrames: Int {
        var frames = 0
        for (data, _) in self.held {
            var buffer = Self.unwrapOutboundIn(data)
            while let length = buffer.readInteger(as: UInt32.self), buffer.readSlice(length: Int(length)) != nil {
                frames += 1
            }
        }
        return frames
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.writes += 1
        if self.holding {
            self.held.append((data, promise))
            // As a socket channel whose peer does not read: bytes wait, so the channel is not writable.
            Self.setWritable(false, context: context)
        } else {
            context.write(data, promise: promise)
        }
    }

    func flush(context: ChannelHandlerContext) {
        self.flushes += 1
        if !self.holding { context.flush() }
    }

    func read(context: ChannelHandlerContext) {
        self.reads += 1
        context.read()
    }

    /// The peer takes everything held so far.
    func release() {
        guard let context = self.context else { return }
        let held = self.held
        self.held.removeAll()
        for (data, promise) in held { context.write(data, promise: promise) }
        context.flush()
        // Nothing waits any more: writable again, as a socket channel says once the kernel took every byte.
        Self.setWritable(true, context: context)
    }

    /// Sets the testing channel's writability and tells the handlers after this one, as a socket channel does
    /// when its unwritten bytes cross the water marks.
    private static func setWritable(_ writable: Bool, context: ChannelHandlerContext) {
        guard let channel = context.channel as? NIOAsyncTestingChannel, channel.isWritable != writable else { return }
        channel.isWritable = writable
        context.fireChannelWritabilityChanged()
    }
}

/// A namespace for these tests: replies and events as large as asked.
enum BlobSchema: NamespaceSchema {
    static let name = "blob"
    static let version: UInt32 = 1
    static let get = MethodSchema<BlobSchema, Google_Protobuf_UInt32Value, Google_Protobuf_BytesValue>(name: "get")
    static let publish = MethodSchema<BlobSchema, Google_Protobuf_UInt32Value, Mentory_V1_Empty>(name: "publish")
    static let blobTopic = TopicSchema<BlobSchema, Mentory_V1_Hello, Mentory_V1_Hello>(
        name: "blob", reads: ["blob.get"])
    static let methods: [MethodInfo] = [get.info, publish.info]
    static let topics: [TopicInfo] = [blobTopic.info]
    static var fileDescriptors: SchemaDescriptors { MentorySchema.fileDescriptors }
}

/// A handler whose replies and events are as large as asked.
struct BlobHandler: MentoryHandler {
    typealias Namespace = BlobSchema

    func routes(_ routes: inout HandlerRoutes<Self>) {
        routes.on(Namespace.get) { request, _, _ in
            Google_Protobuf_BytesValue(Data(repeating: 0x42, count: Int(request.value)))
        }
        routes.on(Namespace.publish) { request, _, context in
            var body = Mentory_V1_Hello()
            body.clientName = String(repeating: "e", count: Int(request.value))
            context.publish(body, on: Namespace.blobTopic)
            return Mentory_V1_Empty()
        }
        routes.snapshot(Namespace.blobTopic) { _ in
            var body = Mentory_V1_Hello()
            body.clientName = "snapshot"
            return body
        }
    }
}

/// One connection handler on an in-process channel, with a real engine on the channel's event loop.
struct Harness {
    let channel: NIOAsyncTestingChannel
    let engine: MentoryEngine

    /// `plugin` declares a plugin the connection (uid 1000, trusted as the daemon's user) may register;
    /// `sharedFlusher` gives the connection a loop-wide ``TickFlusher``, as the server does.
    init(
        plugin: PluginDeclaration? = nil,
        sharedFlusher: Bool = false,
        configure: (inout ServerConfiguration) -> Void = { _ in }
    ) async throws {
        var configuration = ServerConfiguration(listener: .path("/unused"))
        configure(&configuration)
        let loop = NIOAsyncTestingEventLoop()
        // A plugin's answer may take long under ThreadSanitizer on a loaded machine; no test here waits for
        // the plugin deadline, so it is the longest a test should need rather than the daemon's 5 s.
        let engine = MentoryEngine(
            configuration: .init(serverVersion: "test", daemonUID: 1000, pluginCallTimeout: .seconds(600)),
            executor: loop.executor)
        // Its background jobs (a plugin's reset, the calls' deadlines) run as the daemon's service would run them.
        engine.jobs.expectRunner()
        Task.detached { await engine.jobs.run() }
        try await engine.register(BlobHandler())
        if let plugin { try await engine.declarePlugin(plugin) }
        let channel = NIOAsyncTestingChannel(loop: loop)
        // The handlers are made and added on the loop: they are not Sendable.
        let settings = configuration
        try await loop.executeInContext {
            let handler = ConnectionHandler(
                engine: engine,
                id: ConnectionID(1),
                configuration: settings,
                credentials: PeerCredentials(pid: 1, uid: 1000, gid: 1000),
                logger: Logger(label: "test"),
                flusher: sharedFlusher ? TickFlusher(eventLoop: loop) : nil
            )
            try channel.pipeline.syncOperations.addHandlers([PeerSimulator(), handler])
        }
        try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).get()
        self.channel = channel
        self.engine = engine
    }

    /// Runs `body` on the event loop with the peer simulator.
    func peer<Result: Sendable>(_ body: @escaping @Sendable (PeerSimulator) -> Result) async throws -> Result {
        let channel = self.channel
        return try await self.channel.testingEventLoop.executeInContext {
            body(try channel.pipeline.syncOperations.handler(type: PeerSimulator.self))
        }
    }

    /// Delivers `envelopes` as one read batch: one buffer, several frames.
    func send(_ envelopes: [Mentory_V1_Envelope]) async throws {
        var buffer = ByteBuffer()
        for envelope in envelopes { buffer.writeFrame(envelope) }
        try await self.channel.writeInbound(buffer)
        await self.channel.testingEventLoop.run()
    }

    /// Every frame the handler has sent to the socket so far, checked against `maxFrameLength`.
    func received(maxFrameLength: Int = WireProtocol.defaultMaxFrameLength) async throws -> [Mentory_V1_Envelope] {
        var envelopes: [Mentory_V1_Envelope] = []
        while var frame = try await self.channel.readOutbound(as: ByteBuffer.self) {
            while frame.readableBytes > 0 {
                let length = Int(frame.readInteger(as: UInt32.self)!)
                #expect(length <= maxFrameLength, "no frame over the announced limit")
                envelopes.append(try Mentory_V1_Envelope(frame: frame.readSlice(length: length)!))
            }
        }
        return envelopes
    }

    /// The frames sent so far, turning the loop until at least one arrives (for work a task finishes),
    /// for at most a generous 30 seconds; returns as soon as there is one.
    func receivedEventually() async throws -> [Mentory_V1_Envelope] {
        var frames: [Mentory_V1_Envelope] = []
        let deadline = ContinuousClock.now + .seconds(30)
        while frames.isEmpty, ContinuousClock.now < deadline {
            await self.channel.testingEventLoop.run()
            frames += try await self.received()
            if frames.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        }
        return frames
    }

    func handshake() async throws {
        try await self.send([helloEnvelope(clientName: "test")])
        let welcome = try await self.received()
        #expect(welcome.count == 1)
        guard case .welcome = welcome.first?.kind else {
            Issue.record("expected a Welcome, got \(welcome)")
            return
        }
    }

    static func request(_ id: UInt64, _ namespace: String, _ method: String, _ body: Data = Data())
        -> Mentory_V1_Envelope
    {
        requestEnvelope(id: id, namespace, method, body)
    }

    /// A `session.subscribe` request for the `blob` topic.
    static func subscribeToBlob(_ id: UInt64) throws -> Mentory_V1_Envelope {
        var subscribe = Mentory_V1_SubscribeRequest()
        var topic = Mentory_V1_TopicSubscription()
        topic.topic = "blob"
        subscribe.topics = [topic]
        return Self.request(id, "session", "subscribe", try subscribe.serializedData())
    }

    static func blob(_ id: UInt64, bytes: Int, method: String = "get") -> Mentory_V1_Envelope {
        Self.request(id, "blob", method, Google_Protobuf_UInt32Value(UInt32(bytes)).wireBody())
    }
}

extension [Mentory_V1_Envelope] {
    /// The events among these frames.
    var events: [Mentory_V1_Event] {
        self.compactMap { envelope in
            if case .event(let event) = envelope.kind { event } else { nil }
        }
    }
}

private func code(_ code: Mentory_V1_ErrorCode) -> UInt32 { UInt32(code.rawValue) }

@Suite("ConnectionHandler: back-pressure, framing and timeouts")
struct ConnectionHandlerTests {
    @Test(
        "requests that do not suspend are answered within the read, with no task; behind subscribe they wait their turn"
    )
    func immediateAnswers() async throws {
        let harness = try await Harness()
        try await harness.handshake()
        var buffer = ByteBuffer()
        buffer.writeFrame(Harness.request(1, "session", "ping"))
        buffer.writeFrame(Harness.blob(2, bytes: 10))
        buffer.writeFrame(try Harness.subscribeToBlob(3))
        buffer.writeFrame(Harness.request(4, "session", "status"))
        // Only the read itself runs: no task the loop has queued meanwhile.
        try await harness.channel.writeInbound(buffer)
        let immediate: [UInt64] = try await harness.received().compactMap { envelope in
            if case .response(let response) = envelope.kind { response.id } else { nil }
        }
        #expect(immediate == [1, 2])
        await harness.channel.testingEventLoop.run()
        let laterFrames = try await harness.received()
        let later: [UInt64] = laterFrames.compactMap { envelope in
            if case .response(let response) = envelope.kind { response.id } else { nil }
        }
        #expect(later == [3, 4], "subscribe ran as a task, then status in its turn")
        #expect(laterFrames.events.map(\.kind) == [.snapshot])
        _ = try await harness.channel.finish()
    }

    @Test("past maxOutboundBytes the handler stops dispatching and reading; it resumes once the peer drains")
    func outboundBackPressure() async throws {
        let harness = try await Harness {
            $0.maxOutboundBytes = 4096
            $0.maxRequestsInFlight = 16
        }
        try await harness.handshake()
        try await harness.peer { $0.holding = true }
        try await harness.send((1...40).map { Harness.blob($0, bytes: 1000) })
        // `get` answers at once, so each request's reply is written before the next is handled: dispatch
        // stops as soon as the replies pass the 4096-byte bound, far below the 40 requests sent (a
        // suspending handler would also be bounded by the 16 requests in flight).
        let window = 16 + 4096 / 1000 + 1
        let firstRound = try await harness.peer { $0.heldFrames }
        #expect(firstRound >= 4096 / 1000 && firstRound <= window, "dispatch stops at the bounds: \(firstRound)")

        let readsBefore = try await harness.peer { $0.reads }
        harness.channel.read()
        await harness.channel.testingEventLoop.run()
        #expect(try await harness.peer { $0.reads } == readsBefore, "read() is not forwarded past the bound")
        try await harness.send((41...50).map { Harness.blob($0, bytes: 1000) })
        #expect(
            try await harness.peer { $0.heldFrames } == firstRound,
            "frames already read wait; nothing more is dispatched"
        )

        var answered: [UInt64] = []
        var rounds = 0
        while answered.count < 50, rounds < 20 {
            rounds += 1
            try await harness.peer { $0.release() }
            await harness.channel.testingEventLoop.run()
            answered += try await harness.received().map(\.response.id)
            let held = try await harness.peer { $0.heldFrames }
            #expect(held <= window, "round \(rounds) dispatches at most one window: \(held)")
            if answered.count + held < 50 {
                #expect(try await harness.peer { $0.reads } == readsBefore, "no read while requests wait")
            }
        }
        #expect(answered == Array(1...50), "nothing dropped, in order")
        #expect(rounds >= 3, "the drain took several windows")
        #expect(
            try await harness.peer { $0.reads } == readsBefore + 1, "the held-back read is forwarded after the drain")
        _ = try await harness.channel.finish()
    }

    @Test("a connection that sends no Hello is closed with HANDSHAKE_TIMEOUT")
    func handshakeTimeout() async throws {
        let harness = try await Harness { $0.handshakeTimeoutSeconds = 3 }
        await harness.channel.testingEventLoop.advanceTime(by: .seconds(2))
        #expect(try await harness.received().isEmpty)
        #expect(harness.channel.isActive)
        await harness.channel.testingEventLoop.advanceTime(by: .seconds(1))
        let frames = try await harness.received()
        #expect(frames.count == 1)
        #expect(frames.first?.connectionError.error.code == code(.handshakeTimeout))
        #expect(frames.first?.connectionError.closing == true)
        try await harness.channel.closeFuture.get()
    }

    @Test("the handshake timer, not cancelled by the Hello, finds nothing to do when it fires")
    func handshakeTimerAfterHello() async throws {
        let harness = try await Harness { $0.handshakeTimeoutSeconds = 3 }
        try await harness.handshake()
        await harness.channel.testingEventLoop.advanceTime(by: .seconds(4))
        #expect(try await harness.received().isEmpty)
        #expect(harness.channel.isActive)
        try await harness.send([Harness.request(1, "session", "ping")])
        let frames = try await harness.received()
        #expect(frames.count == 1)
        #expect(frames.first?.response.id == 1)
        _ = try await harness.channel.finish()
    }

    @Test("frames are split from the bytes however they arrive: a byte per read, or several frames per read")
    func framing() async throws {
        let harness = try await Harness()
        try await harness.handshake()
        var bytes = ByteBuffer()
        for id in 1...3 { bytes.writeFrame(Harness.request(UInt64(id), "session", "ping")) }
        for id in 4...6 { bytes.writeFrame(Harness.blob(UInt64(id), bytes: 10)) }
        // The first three frames a byte at a time, the rest in one read.
        let firstThree = bytes.readableBytes / 2
        while bytes.readableBytes > 0 {
            let length = bytes.readableBytes > firstThree ? 1 : bytes.readableBytes
            try await harness.channel.writeInbound(bytes.readSlice(length: length)!)
        }
        await harness.channel.testingEventLoop.run()
        let replies = try await harness.received()
        #expect(replies.map(\.response.id) == Array(1...6), "each frame handled once, in order")
        #expect(
            replies.allSatisfy { envelope in
                if case .body = envelope.response.result { true } else { false }
            })
        _ = try await harness.channel.finish()
    }

    @Test("a frame cut short by the peer closing its side gets TRUNCATED_FRAME; whole frames before it are answered")
    func truncatedFrame() async throws {
        let harness = try await Harness()
        try await harness.handshake()
        var bytes = ByteBuffer()
        bytes.writeFrame(Harness.request(1, "session", "ping"))
        bytes.writeFrame(Harness.request(2, "session", "ping"))
        try await harness.channel.writeInbound(bytes.getSlice(at: bytes.readerIndex, length: bytes.readableBytes - 3)!)
        harness.channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        await harness.channel.testingEventLoop.run()
        let frames = try await harness.received()
        #expect(frames.first?.response.id == 1)
        #expect(frames.last?.connectionError.error.code == code(.truncatedFrame))
        #expect(frames.last?.connectionError.closing == true)
        try await harness.channel.closeFuture.get()
    }

    @Test("a length over max_frame_length closes the connection with FRAME_TOO_LARGE before its payload arrives")
    func frameTooLarge() async throws {
        let harness = try await Harness { $0.maxFrameLength = 4096 }
        try await harness.handshake()
        var bytes = ByteBuffer()
        bytes.writeFrame(Harness.request(1, "session", "ping"))
        bytes.writeInteger(UInt32(4097))
        try await harness.channel.writeInbound(bytes)
        await harness.channel.testingEventLoop.run()
        let frames = try await harness.received()
        #expect(frames.first?.response.id == 1)
        #expect(frames.last?.connectionError.error.code == code(.frameTooLarge))
        #expect(frames.last?.connectionError.closing == true)
        try await harness.channel.closeFuture.get()
    }

    @Test("with the loop's flusher, a read's replies wait for the end of the tick, then go out in one flush")
    func endOfTickFlush() async throws {
        let harness = try await Harness(sharedFlusher: true)
        try await harness.handshake()
        let flushesBefore = try await harness.peer { $0.flushes }
        var buffer = ByteBuffer()
        for id in 1...5 { buffer.writeFrame(Harness.request(UInt64(id), "session", "ping")) }
        try await harness.channel.writeInbound(buffer)
        #expect(try await harness.received().isEmpty, "nothing is flushed within the read")
        await harness.channel.testingEventLoop.run()
        #expect(try await harness.received().map(\.response.id) == Array(1...5))
        #expect(try await harness.peer { $0.flushes } - flushesBefore == 1)
        _ = try await harness.channel.finish()
    }

    @Test("N pipelined pings in one read batch are flushed once", arguments: [1, 10, 100])
    func flushCoalescing(pings: Int) async throws {
        let harness = try await Harness()
        try await harness.handshake()
        let flushesBefore = try await harness.peer { $0.flushes }
        try await harness.send((1...UInt64(pings)).map { Harness.request($0, "session", "ping") })
        let replies = try await harness.received()
        #expect(replies.map(\.response.id) == Array(1...UInt64(pings)))
        #expect(try await harness.peer { $0.flushes } - flushesBefore == 1)
        _ = try await harness.channel.finish()
    }

    @Test("N pipelined pings in one read batch reach the socket as one write", arguments: [1, 10, 100])
    func writeCoalescing(pings: Int) async throws {
        let harness = try await Harness()
        try await harness.handshake()
        let writesBefore = try await harness.peer { $0.writes }
        try await harness.send((1...UInt64(pings)).map { Harness.request($0, "session", "ping") })
        let replies = try await harness.received()
        #expect(replies.map(\.response.id) == Array(1...UInt64(pings)))
        #expect(try await harness.peer { $0.writes } - writesBefore == 1)
        _ = try await harness.channel.finish()
    }

    @Test("the replies and events of one read batch reach the socket as one write, in order")
    func eventCoalescing() async throws {
        let harness = try await Harness()
        try await harness.handshake()
        try await harness.send([try Harness.subscribeToBlob(1)])
        _ = try await harness.received()
        let writesBefore = try await harness.peer { $0.writes }
        try await harness.send((2...21).map { Harness.blob($0, bytes: 10, method: "publish") })
        let frames = try await harness.received()
        #expect(frames.events.map(\.sequence) == Array(1...20), "every change, in order")
        #expect(frames.filter { $0.response.id >= 2 }.map(\.response.id) == Array(2...21))
        #expect(try await harness.peer { $0.writes } - writesBefore == 1)
        _ = try await harness.channel.finish()
    }

    @Test("a frame over the coalescing size is written as it is, after the smaller frames before it")
    func largeFramesAreNotCopied() async throws {
        let harness = try await Harness()
        try await harness.handshake()
        let writesBefore = try await harness.peer { $0.writes }
        let large = OutboundFrameBuffer.maxFrameBytes * 2
        try await harness.send([
            Harness.request(1, "session", "ping"), Harness.blob(2, bytes: large), Harness.request(3, "session", "ping"),
        ])
        let replies = try await harness.received()
        #expect(replies.map(\.response.id) == [1, 2, 3])
        // The first ping's reply, the large reply, then the last ping's reply with the flush.
        #expect(try await harness.peer { $0.writes } - writesBefore == 3)
        _ = try await harness.channel.finish()
    }

    @Test("a reply over max_frame_length becomes an INTERNAL error naming the size, the limit and the method")
    func oversizedReply() async throws {
        let harness = try await Harness { $0.maxFrameLength = 4096 }
        try await harness.handshake()
        try await harness.send([Harness.blob(7, bytes: 10_000), Harness.blob(8, bytes: 100)])
        let replies = try await harness.received(maxFrameLength: 4096)
        #expect(replies.count == 2)
        let failed = replies[0].response
        #expect(failed.id == 7)
        #expect(failed.error.code == code(.internal))
        #expect(failed.error.message.contains("blob.get"))
        #expect(failed.error.message.contains("4096"))
        let numbers = failed.error.message.split { !$0.isNumber }.compactMap { Int($0) }
        #expect(numbers.contains { $0 >= 10_000 }, "the size: \(failed.error.message)")
        let echoed = try Google_Protobuf_BytesValue(serializedBytes: replies[1].response.body)
        #expect(replies[1].response.id == 8 && echoed.value.count == 100, "the connection goes on")
        _ = try await harness.channel.finish()
    }

    @Test("an event over max_frame_length is refused and the subscriber gets a reset instead")
    func oversizedEvent() async throws {
        let harness = try await Harness { $0.maxFrameLength = 4096 }
        try await harness.handshake()
        try await harness.send([try Harness.subscribeToBlob(1)])
        _ = try await harness.received(maxFrameLength: 4096)
        try await harness.send([Harness.blob(2, bytes: 10_000, method: "publish")])
        await harness.channel.testingEventLoop.run()
        let frames = try await harness.received(maxFrameLength: 4096)
        #expect(frames.contains { $0.response.id == 2 })
        #expect(!frames.events.contains { $0.kind == .change }, "the oversized change is not sent")
        #expect(frames.events.map(\.kind) == [.reset], "a reset takes its place")
        _ = try await harness.channel.finish()
    }

    @Test("events stop at subscriberQueueBytes while the peer does not read, then a reset follows the drain")
    func subscriberQueueBound() async throws {
        let harness = try await Harness {
            $0.subscriberQueueBytes = 8192
            $0.maxOutboundBytes = 1 << 20
        }
        try await harness.handshake()
        try await harness.send([try Harness.subscribeToBlob(1)])
        _ = try await harness.received()
        try await harness.peer { $0.holding = true }
        try await harness.send((2...41).map { Harness.blob($0, bytes: 1000, method: "publish") })
        try await harness.peer {
            $0.holding = false
            $0.release()
        }
        await harness.channel.testingEventLoop.run()
        let frames = try await harness.received()
        let changes = frames.events.filter { $0.kind == .change }.count
        #expect(changes > 0 && changes <= 8, "about subscriberQueueBytes of events, not all 40: \(changes)")
        #expect(frames.filter { $0.response.id >= 2 }.count == 40, "every reply is sent")
        #expect(frames.events.last?.kind == .reset, "the drain brings a reset with the current state")
        #expect(frames.events.last?.sequence == 40, "carrying the newest sequence number")
        _ = try await harness.channel.finish()
    }

    @Test("a plugin's calls go out as PluginCall frames and its PluginReply answers; a full queue refuses calls")
    func pluginCallsAndReplies() async throws {
        let harness = try await Harness(plugin: PluginDeclaration(name: "echo", namespace: "echo")) {
            $0.maxOutboundBytes = 2048
        }
        try await harness.handshake()
        var registration = Mentory_V1_PluginRegisterRequest()
        registration.pluginProtocolVersion = WireProtocol.pluginProtocolVersion
        registration.namespace = "echo"
        var method = Mentory_V1_MethodDescription()
        method.name = "say"
        method.request = "google.protobuf.BytesValue"
        method.reply = "google.protobuf.BytesValue"
        registration.methods = [method]
        try await harness.send([Harness.request(1, "plugin", "register", registration.wireBody())])
        #expect(try await harness.received().first?.response.error.message == "")

        // The plugin calls its own namespace: the call comes back to it as a PluginCall.
        let body = Google_Protobuf_BytesValue(Data(repeating: 1, count: 700)).wireBody()
        try await harness.send([Harness.request(2, "echo", "say", body)])
        let forwarded = try await harness.receivedEventually()
        guard case .pluginCall(let call) = forwarded.first?.kind else {
            Issue.record("expected a PluginCall, got \(forwarded)")
            return
        }
        #expect(call.method == "say" && call.body == body && call.caller.uid == 1000)
        var reply = Mentory_V1_PluginReply()
        reply.callID = call.callID
        reply.body = body
        var envelope = Mentory_V1_Envelope()
        envelope.pluginReply = reply
        try await harness.send([envelope])
        // The reply resumes the call's task, which may need more than one turn of the loop.
        let answered = try await harness.receivedEventually()
        #expect(answered.map(\.response.id) == [2])
        #expect(answered.first?.response.body == body)

        // The plugin stops reading: calls fill its queue up to maxOutboundBytes, then are refused at once.
        try await harness.peer { $0.holding = true }
        try await harness.send((3...6).map { Harness.request($0, "echo", "say", body) })
        try await harness.peer { $0.release() }
        let frames = try await harness.received()
        let refused = frames.compactMap { frame -> Mentory_V1_Response? in
            if case .response(let response) = frame.kind { response } else { nil }
        }
        #expect(frames.count { if case .pluginCall = $0.kind { true } else { false } } == 2)
        // 6 is not dispatched yet: the replies reserved for 3 to 5 (each the size of 2's) fill the bound with the
        // two calls queued, so it waits unread instead.
        #expect(refused.map(\.id) == [5])
        #expect(
            refused.allSatisfy { $0.error.code == code(.unavailable) && $0.error.message.contains("queue is full") })
        _ = try await harness.channel.finish()
    }

    @Test(
        "a request before the Hello gets HANDSHAKE_REQUIRED, a second Hello ALREADY_HANDSHAKEN; a second shutdown sends nothing"
    )
    func handshakeAndCloseTransitions() async throws {
        let harness = try await Harness()
        try await harness.send([Harness.request(1, "session", "ping")])
        let early = try await harness.received()
        #expect(early.map(\.response.id) == [1])
        #expect(early.first?.response.error.code == code(.handshakeRequired))

        try await harness.handshake()
        try await harness.send([helloEnvelope(clientName: "again"), Harness.request(2, "session", "ping")])
        let second = try await harness.received()
        #expect(second.count == 2)
        #expect(second.first?.connectionError.error.code == code(.alreadyHandshaken))
        #expect(second.first?.connectionError.closing == false)
        #expect(second.last?.response.id == 2 && second.last?.response.error.code == 0, "the connection goes on")

        let channel = harness.channel
        try await harness.channel.testingEventLoop.executeInContext {
            let handler = try channel.pipeline.syncOperations.handler(type: ConnectionHandler.self)
            handler.failConnection(.shuttingDown)
            handler.failConnection(.shuttingDown)
        }
        await harness.channel.testingEventLoop.run()
        let closing = try await harness.received()
        #expect(closing.count == 1, "one closing error: \(closing)")
        #expect(closing.first?.connectionError.error.code == code(.shuttingDown))
        #expect(closing.first?.connectionError.closing == true)
        try await harness.channel.closeFuture.get()
    }
}
