import Logging
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOCore

/// Speaks the protocol on one connection: handshake, request routing, errors and back-pressure.
///
/// It holds only I/O state; every request goes to the engine, which runs on this channel's event loop, so a
/// request costs no thread hop.
///
/// The connection's lifecycle and back-pressure state (the handshake phase, whether the engine knows the
/// connection, the outbound byte count, whether reading, events or a flush wait) is a
/// ``ConnectionStateMachine``, a value stored here and mutated in place. This handler turns each NIO callback
/// and engine call into an event for it and performs the action it returns; the framing, the encoding, the
/// engine calls, the ids in flight with their reservations and all I/O stay here.
///
/// Back-pressure, both ways:
/// - Every reply and event is encoded here and counted in ``outboundBytes`` until the kernel has taken
///   it: everything flushed is counted out together once the channel holds no unwritten byte (its water
///   marks, ``everythingTaken``, make writability say so). At ``ServerConfiguration/maxOutboundBytes`` the
///   handler stops dispatching requests and stops reading the socket; it resumes once that has drained to
///   half. Nothing is dropped.
/// - Events are refused (the engine sends a reset later) once the connection's outbound bytes would
///   pass ``ServerConfiguration/subscriberQueueBytes``.
/// - Frames already read wait here, in order and still in the bytes read, while more than
///   ``ServerConfiguration/maxRequestsInFlight`` requests are in flight or the outbound bound holds.
/// - Per person: the connection's uid has one ``UIDAccount`` for all its connections. A request that suspends
///   reserves its reply's size there (and against this connection's ``ServerConfiguration/maxOutboundBytes``)
///   before it is dispatched; written bytes count there until the kernel takes them. While the uid (or every
///   uid together) is over its budget, no frame is handled and the socket is not read; events are refused
///   (a reset follows). The account wakes the connection once there is room (see ``UIDBudgets``).
///
/// The handler splits the byte stream into frames itself (``LengthPrefixedFrameDecoder/nextFrame(from:)``),
/// as it handles them: a read costs one pass through the pipeline however many frames it carries.
///
/// Writes are coalesced: nothing is flushed per message. With the loop's ``TickFlusher`` (as the server
/// runs), a connection that wrote is flushed once per event-loop tick, after every read the tick had ready
/// and the engine work queued before it, as Redis writes its replies before it sleeps: a peer with several
/// connections is woken once for a burst of replies. Without one, a flush follows each read batch and the
/// engine work of a tick. The small frames of one flush reach the channel as one buffer: one pipeline write
/// and one `writev` for a tick's replies and events, however many there are.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let engine: MentoryEngine
    private let id: ConnectionID
    private let configuration: ServerConfiguration
    private let logger: Logger
    private let credentials: PeerCredentials?
    private let metrics: ServerMetrics
    /// Shared by the connections of this event loop; `nil` flushes with a task of this handler's own.
    private let flusher: TickFlusher?
    /// The lifecycle and back-pressure state: the handshake phase, whether the engine knows this connection,
    /// the outbound bytes and whether reading, events or a flush wait. Mutated in place, never copied out.
    private var state: ConnectionStateMachine
    /// A request being computed: its `namespace.method` for error messages, and the bytes reserved for it.
    private struct InFlightRequest {
        var method: String
        /// Reserved for the reply, settled to its real size once it is encoded.
        var replyBytes: Int
        /// Reserved for the snapshots a `session.subscribe` queues (part of ``eventReservation``).
        var snapshotBytes: Int
    }

    /// Request ids in flight.
    private var inFlight: [UInt64: InFlightRequest] = [:]
    /// The per-uid budgets, shared by every connection of the server.
    private let budgets: UIDBudgets
    /// This connection's uid's share of ``budgets``.
    private let account: UIDAccount
    /// Bytes reserved in ``account`` for the replies of the requests in flight.
    private var reservedReplyBytes = 0
    /// Bytes reserved in ``account`` for snapshots and resets being taken; the events they become use it up.
    private var eventReservation = 0
    /// The bytes read whose frames are not handled yet: a frame cut short, or whole frames waiting for room.
    private var inbound = ConnectionHandler.noBytes
    private let frameDecoder: LengthPrefixedFrameDecoder
    /// When the frames being handled now were taken up: the clock is read once per batch of frames, not per
    /// request. A request's duration counts from here, so it includes the requests ahead of it in its batch.
    private var batchStarted: ContinuousClock.Instant?
    /// Bytes written into the pipeline that the kernel has not taken yet.
    var outboundBytes: Int { self.state.outboundBytes }
    /// Small frames written since the last flush, not yet handed to the channel (see ``write(_:promise:)``).
    private var coalesced: ByteBuffer?
    /// Whether ``coalesced`` is this connection's own buffer rather than the one frame it holds.
    private var coalescedIsOwned = false
    private var handshakeTimeout: Scheduled<Void>?
    private var context: ChannelHandlerContext?
    /// The channel's allocator, taken once: asking the channel for it on every write costs more than the write.
    private var allocator = ByteBufferAllocator()

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
        self.flusher = flusher
        self.state = ConnectionStateMachine(configuration)
        let budgets = budgets ?? UIDBudgets(configuration)
        self.budgets = budgets
        self.account = budgets.open(uid: credentials?.uid)
        self.frameDecoder = LengthPrefixedFrameDecoder(maxFrameLength: configuration.maxFrameLength)
        self.engine = engine
        self.id = id
        self.configuration = configuration
        self.credentials = credentials
        self.metrics = metrics ?? ServerMetrics(factory: engine.metricsFactory)
        var logger = logger
        logger[metadataKey: "connection"] = "\(id)"
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        self.allocator = context.channel.allocator
        // Writability then tells when the kernel took what was flushed (see `flushIfNeeded`).
        try? context.channel.syncOptions?.setOption(.writeBufferWaterMark, value: Self.everythingTaken)
        if context.channel.isActive {
            self.startHandshakeTimer(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.handshakeTimeout?.cancel()
        self.context = nil
        // Written but never flushed, or flushed but never taken: nothing else will count these out.
        let removed = self.state.handlerRemoved()
        if removed.discardedBytes > 0 { self.account.release(removed.discardedBytes) }
        if removed.closeAccount { self.account.connectionClosed(self) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.startHandshakeTimer(context: context)
        context.fireChannelActive()
    }

    private func startHandshakeTimer(context: ChannelHandlerContext) {
        guard self.handshakeTimeout == nil, self.state.isAwaitingHello else { return }
        let seconds = self.configuration.handshakeTimeoutSeconds
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.handshakeTimeout = context.eventLoop.scheduleTask(in: .seconds(Int64(seconds))) {
            handler.value.failConnection(.handshakeTimeout(seconds: seconds))
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.handshakeTimeout?.cancel()
        // What was flushed and not taken will not be: the channel failed those writes.
        self.flushedBytesTaken()
        if self.state.channelInactive() { self.detach() }
        self.inbound = Self.noBytes
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !self.state.isClosing else { return }
        var bytes = Self.unwrapInboundIn(data)
        if self.inbound.readableBytes == 0 {
            self.inbound = bytes
        } else {
            // Only a frame cut short, or frames waiting for room, are kept: move them to the front first.
            self.inbound.discardReadBytes()
            self.inbound.writeBuffer(&bytes)
        }
        self.handlePendingFrames()
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        // With a loop-wide flusher, the replies of this read go out with every other connection's at the end
        // of the loop's tick, after all the reads the tick had ready (as Redis writes its replies before it
        // sleeps): a peer is woken once for a burst of replies rather than once per connection read.
        if self.flusher == nil { self.flushIfNeeded() }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // With remote half-closure allowed, a frame cut short gets TRUNCATED_FRAME, then close; EOF at a
        // frame boundary just closes. Whole frames still waiting for room are dropped with the connection.
        if event as? ChannelEvent == .some(.inputClosed), !self.state.isClosing {
            self.handlePendingFrames()
            if let error = self.unfinishedFrame() { self.failConnection(error) }
        }
        if event as? ChannelEvent == .some(.inputClosed), self.state.inputClosed() {
            self.logger.debug("peer closed its side")
            self.flushIfNeeded()
            context.close(promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // Frame errors never come this way: this handler splits the frames itself (handlePendingFrames).
        self.logger.debug("connection error", metadata: ["error": "\(error)"])
        self.state.errorCaught()
        context.close(promise: nil)
    }

    func read(context: ChannelHandlerContext) {
        switch self.state.readRequested(inFlight: self.inFlight.count, hasWholeFrame: self.hasWholeFrame) {
        case .read:
            context.read()
        case .holdBack:
            self.waitForBudgetIfNeeded()
        }
    }

    // MARK: Inbound flow control

    /// Whether another frame may be handled now: requests in flight and outbound bytes are under their bounds.
    private var canHandleFrames: Bool {
        self.state.canHandleFrames(inFlight: self.inFlight.count)
    }

    /// Whether another request may be dispatched now: outbound bytes with the replies reserved are under this
    /// connection's bound, and its uid is within its budget. A `PluginReply` or `Hello` is handled regardless:
    /// it costs no reply, and a plugin's answers complete calls that hold memory.
    private var canDispatchRequests: Bool {
        self.outboundBytes + self.reservedReplyBytes < self.configuration.maxOutboundBytes && self.account.hasRoom
    }

    /// Whether `frame` is certainly a `PluginReply` or a `Hello`: its first field is `Envelope.plugin_reply`
    /// (field 8) or `Envelope.hello` (field 1). Anything else waits for ``canDispatchRequests``.
    private static func costsNoReply(_ frame: ByteBuffer) -> Bool {
        let tag = frame.getInteger(at: frame.readerIndex, as: UInt8.self)
        return tag == 0x42 || tag == 0x0A
    }

    /// Asks the account to wake this connection once its uid has room, when that is what holds it back.
    private func waitForBudgetIfNeeded() {
        if !self.account.hasRoom { self.waitForRoom() }
    }

    /// Asks the account to wake this connection once its uid has room again (once until woken).
    private func waitForRoom() {
        guard self.state.budgetExhausted() else { return }
        self.metrics.budgetWaits.increment()
        self.logger.debug(
            "uid over its budget; this connection waits for room",
            metadata: [
                "uidQueuedBytes": "\(self.account.queuedBytes)",
                "uidRequestsInFlight": "\(self.account.requestsInFlight)",
            ]
        )
        self.account.wait(self)
    }

    /// The account has room again: handles what waited, next tick (not inside the release that freed it).
    func budgetFreed() {
        self.state.budgetAvailable()
        guard let context = self.context else { return }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            handler.value.resume()
            handler.value.checkEventsDrained()
        }
    }

    /// Handles the whole frames read, in order, while there is room.
    ///
    /// The engine's isolation is asserted once for the batch (the engine's executor is this event loop), not
    /// once per request: the check asks the concurrency runtime and the loop which thread this is.
    private func handlePendingFrames() {
        guard let context = self.context else { return }
        self.batchStarted = nil
        defer { self.batchStarted = nil }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.engine.assumeIsolated { engine in handler.value.handlePendingFrames(engine) }
    }

    private func handlePendingFrames(_ engine: isolated MentoryEngine) {
        while self.canHandleFrames {
            // Taken from a view of the bytes first: a request over the budget stays where it is, unread.
            var rest = self.inbound
            let frame: ByteBuffer?
            do {
                frame = try self.frameDecoder.nextFrame(from: &rest)
            } catch {
                self.failConnection(error)
                return
            }
            guard let frame else { return }
            guard self.canDispatchRequests || Self.costsNoReply(frame) else {
                self.waitForBudgetIfNeeded()
                return
            }
            self.inbound = rest
            self.handle(frame, engine)
        }
    }

    /// Whether a whole frame waits in ``inbound``.
    private var hasWholeFrame: Bool {
        guard let length = self.inbound.getInteger(at: self.inbound.readerIndex, as: UInt32.self) else {
            return false
        }
        return self.inbound.readableBytes >= WireProtocol.lengthPrefixSize + Int(length)
    }

    /// What is wrong with the bytes after the whole frames in ``inbound``, at end of input: a length over the
    /// limit, or a frame cut short; `nil` when they end at a frame boundary. Read through the decoder, on a
    /// view of the bytes (whole frames still waiting for room stay where they are).
    private func unfinishedFrame() -> FrameError? {
        var rest = self.inbound
        do {
            while try self.frameDecoder.nextFrame(from: &rest) != nil {}
        } catch {
            return error
        }
        return rest.readableBytes > 0 ? .truncatedFrame(bufferedBytes: rest.readableBytes) : nil
    }

    /// Closes the connection over a frame error, with its code.
    private func failConnection(_ error: FrameError) {
        switch error {
        case .frameTooLarge(let length, let maximum):
            self.failConnection(MentoryError.frameTooLarge(length: length, maximum: maximum))
        case .truncatedFrame:
            self.failConnection(MentoryError.truncatedFrame)
        }
    }

    /// The empty buffer ``inbound`` holds when every byte read is handled.
    private static let noBytes = ByteBuffer()

    /// Handles what waited, then reads again if a read was held back and nothing waits any more.
    private func resume() {
        self.handlePendingFrames()
        guard let context = self.context else { return }
        if self.state.readMayResume(inFlight: self.inFlight.count, hasWholeFrame: self.hasWholeFrame) {
            context.read()
        }
    }

    private func handle(_ frame: ByteBuffer, _ engine: isolated MentoryEngine) {
        let envelope: InboundEnvelope
        do {
            envelope = try InboundEnvelope(frame: frame)
        } catch {
            self.sendConnectionError(.malformedMessage(error.reason), closing: false)
            return
        }
        switch envelope {
        case .request(let request):
            self.handleRequest(request, engine)
        case .other(let envelope):
            switch envelope.kind {
            case .hello(let hello):
                self.handleHello(hello)
            case .request(let request):
                self.handleRequest(InboundRequest(request), engine)
            case .pluginReply(let reply):
                self.handlePluginReply(reply)
            default:
                self.sendConnectionError(
                    .malformedMessage("clients send only Hello, Request and PluginReply"), closing: false)
            }
        }
    }

    // MARK: Protocol

    private func handleHello(_ hello: Mentory_V1_Hello) {
        guard let context = self.context else { return }
        switch self.state.helloReceived(rejection: Self.rejection(of: hello)) {
        case .attach:
            break
        case .refuse(let error):
            self.sendConnectionError(error, closing: false)
            return
        case .fail(let error):
            self.failConnection(error)
            return
        }
        self.handshakeTimeout?.cancel()
        let connection = ConnectionContext(id: self.id, clientName: hello.clientName, credentials: self.credentials)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        let sink = ChannelEventSink(handler: handler)
        let maxFrameLength = UInt32(clamping: self.configuration.maxFrameLength)
        self.logger.debug("handshake", metadata: ["client": "\(hello.clientName)"])
        // Attached at once (the engine's executor is this event loop), so a request pipelined right
        // behind the Hello finds its connection, whether it is answered at once or as a task.
        var welcome = self.engine.assumeIsolated { engine in engine.attach(connection, sink: sink) }
        welcome.maxFrameLength = maxFrameLength
        self.sendWelcome(welcome)
    }

    /// What is wrong with `hello`, if anything: a protocol version this server does not speak, or a client
    /// name over its limit.
    private static func rejection(of hello: Mentory_V1_Hello) -> MentoryError? {
        guard hello.protocolVersion == WireProtocol.version else {
            return .unsupportedVersion(requested: hello.protocolVersion, supported: WireProtocol.version)
        }
        do {
            try FieldLimits.clientName.check(hello.clientName)
        } catch {
            return error
        }
        return nil
    }

    private func handleRequest(_ request: InboundRequest, _ engine: isolated MentoryEngine) {
        guard case .dispatch = self.state.requestReceived(), self.context != nil else {
            var response = OutboundResponse.failure(id: request.id, error: MentoryError.handshakeRequired.wireError)
            self.send(response: &response)
            return
        }
        guard self.inFlight.isEmpty || self.inFlight[request.id] == nil else {
            var response = OutboundResponse.failure(
                id: request.id, error: MentoryError.duplicateRequestID(request.id).wireError)
            self.send(response: &response)
            return
        }
        let id = self.id
        let received: ContinuousClock.Instant
        if let started = self.batchStarted {
            received = started
        } else {
            received = .now
            self.batchStarted = received
        }
        // A request whose handler does not suspend is answered here, on the event loop (the engine's
        // executor), with no task; the loop handling pending frames goes on with the next one. Behind a
        // request still in flight it waits its turn as a task instead, so requests start in the order sent.
        switch engine.respond(to: request, from: id, received: received, queued: !self.inFlight.isEmpty) {
        case .answered(var response):
            if !self.state.isClosing {
                self.send(response: &response, method: "\(request.namespace).\(request.method)")
            }
        case .suspended(_, let queuesSnapshots):
            // The task cannot start before this returns (it runs on this event loop), so the reply is
            // reserved before it is computed and the bound holds with the replies in flight. Its response
            // comes back through the connection's sink (`finish`).
            let method = "\(request.namespace).\(request.method)"
            let replyBytes = self.budgets.reservation(for: method)
            let snapshotBytes = queuesSnapshots ? self.budgets.snapshotReservation : 0
            self.inFlight[request.id] = InFlightRequest(
                method: method, replyBytes: replyBytes, snapshotBytes: snapshotBytes)
            self.reservedReplyBytes += replyBytes
            self.eventReservation += snapshotBytes
            self.account.charge(replyBytes + snapshotBytes)
            self.account.requestStarted()
        }
    }

    private func handlePluginReply(_ reply: Mentory_V1_PluginReply) {
        if case .refuse(let error) = self.state.pluginReplyReceived() {
            self.sendConnectionError(error, closing: false)
            return
        }
        let id = self.id
        self.onEngine { engine in engine.pluginReply(reply, from: id) }
    }

    func finish(_ response: consuming OutboundResponse) {
        guard let request = self.inFlight.removeValue(forKey: response.id) else {
            if !self.state.isClosing { self.send(response: &response) }
            self.resume()
            return
        }
        if !self.state.isClosing {
            let bytes = self.send(response: &response, method: request.method)
            self.budgets.learn(request.method, replyBytes: bytes)
        }
        // Settled after the reply was counted, so the account does not dip below what it holds.
        self.reservedReplyBytes -= request.replyBytes
        let snapshotLeft = min(self.eventReservation, request.snapshotBytes)
        self.eventReservation -= snapshotLeft
        self.account.release(request.replyBytes + snapshotLeft)
        self.account.requestFinished()
        self.resume()
    }

    /// Delivers an event to the peer, or refuses it (`false`) when the subscriber's queue is full or the
    /// event would not fit in a frame; the engine then sends a reset once ``outboundBytes`` drain.
    func deliver(_ shared: SharedEvent) -> Bool {
        guard self.state.isOpen else { return false }
        guard shared.payloadLength <= self.configuration.maxFrameLength else {
            let event = shared.event
            self.logger.error(
                """
                event too large for a frame; the subscriber gets a reset instead: \(event.topic) \(event.kind) of \
                \(shared.payloadLength) bytes, over limits.maxFrameLength (\(self.configuration.maxFrameLength))
                """,
                metadata: [
                    "topic": "\(event.topic)", "kind": "\(event.kind)", "bytes": "\(shared.payloadLength)",
                    "maxFrameLength": "\(self.configuration.maxFrameLength)",
                ]
            )
            self.state.eventRefused()
            // A change is followed by a reset soon; a reset or snapshot too large waits for the next drain
            // so an unsendable snapshot cannot loop.
            if event.kind == .change { self.checkDrained(soon: true) }
            return false
        }
        let frame = shared.frame
        if self.outboundBytes > 0, self.outboundBytes + frame.readableBytes > self.configuration.subscriberQueueBytes {
            self.state.eventRefused()
            return false
        }
        // A snapshot or reset being taken had its room reserved; a live event needs room in the uid's budget.
        guard self.account.hasRoom(for: frame.readableBytes, ownReserved: self.eventReservation) else {
            self.state.eventRefused()
            self.waitForRoom()
            return false
        }
        // The same frame (one storage) goes to every subscriber.
        self.write(frame)
        if self.eventReservation > 0 {
            let used = min(self.eventReservation, frame.readableBytes)
            self.eventReservation -= used
            self.account.release(used)
        }
        return true
    }

    /// Counts a call a handler or plugin makes on this connection's client's behalf as one more request of its
    /// uid's, if the uid has room (see ``EventSink/startCallOnBehalf()``); it does not wait for room.
    func startCallOnBehalf() -> Bool {
        guard self.account.hasRoom else { return false }
        self.account.requestStarted()
        return true
    }

    /// Counts out a call ``startCallOnBehalf()`` counted; may wake the uid's waiting connections.
    func finishCallOnBehalf() {
        self.account.requestFinished()
    }

    /// Sends a call to the plugin on this connection, or refuses it (`false`) when the call would take
    /// the connection's outbound bytes to ``ServerConfiguration/maxOutboundBytes`` (the plugin is not
    /// reading: it may be hung) or would not fit in a frame. The engine then fails the call UNAVAILABLE.
    func deliver(pluginCall: Mentory_V1_PluginCall) -> Bool {
        guard self.state.isOpen else { return false }
        var envelope = Mentory_V1_Envelope()
        envelope.pluginCall = pluginCall
        guard
            case .success(let frame) = ServerFrameEncoder.encode(
                envelope, maxFrameLength: self.configuration.maxFrameLength)
        else { return false }
        // Stay under the outbound bound, so a plugin's own replies are always read.
        guard self.outboundBytes + frame.readableBytes < self.configuration.maxOutboundBytes else { return false }
        self.write(frame)
        return true
    }

    // MARK: Output

    private func sendWelcome(_ welcome: Mentory_V1_Welcome) {
        guard self.state.isOpen else { return }
        var envelope = Mentory_V1_Envelope()
        envelope.welcome = welcome
        switch ServerFrameEncoder.encode(envelope, maxFrameLength: self.configuration.maxFrameLength) {
        case .success(let frame):
            self.write(frame)
        case .failure(let oversized):
            self.failConnection(
                .internal(
                    "the Welcome is \(oversized.length) bytes, over the frame limit of \(oversized.maximum) bytes;"
                        + " raise limits.maxFrameLength"
                )
            )
        }
    }

    /// Sends `response`, taking its reply body out of it to frame in place; returns the bytes of its frame.
    @discardableResult
    private func send(response: inout OutboundResponse, method: @autoclosure () -> String = "?") -> Int {
        if let length = self.coalesceResponse(response) { return length }
        switch ServerFrameEncoder.encode(&response, maxFrameLength: self.configuration.maxFrameLength) {
        case .success(let frame):
            self.write(frame)
            return frame.readableBytes
        case .failure(let oversized):
            let method = method()
            let message =
                "the reply to \(method) is \(oversized.length) bytes, over the frame limit of \(oversized.maximum)"
                + " bytes; the handler must page its replies"
            self.logger.error(
                "reply too large for a frame; sent an error instead: \(message)",
                metadata: [
                    "method": "\(method)", "bytes": "\(oversized.length)", "maxFrameLength": "\(oversized.maximum)",
                ]
            )
            var replacement = Mentory_V1_Envelope()
            replacement.response = .failure(id: response.id, error: MentoryError.internal(message).wireError)
            self.write(ServerFrameEncoder.encodeBounded(replacement, maxFrameLength: self.configuration.maxFrameLength))
            // What the handler tried to send is what the next one may try: reserve a whole frame for it.
            return oversized.length
        }
    }

    private func sendConnectionError(_ error: MentoryError, closing: Bool) {
        self.write(
            Self.connectionErrorFrame(error, closing: closing, maxFrameLength: self.configuration.maxFrameLength))
    }

    static func connectionErrorFrame(_ error: MentoryError, closing: Bool, maxFrameLength: Int) -> ByteBuffer {
        var connectionError = Mentory_V1_ConnectionError()
        connectionError.error = error.wireError
        connectionError.closing = closing
        var envelope = Mentory_V1_Envelope()
        envelope.connectionError = connectionError
        return ServerFrameEncoder.encodeBounded(envelope, maxFrameLength: maxFrameLength)
    }

    /// Writes one frame without flushing, counts it until the kernel has taken it, and makes sure a flush follows.
    ///
    /// A small frame without a promise is copied into ``coalesced``, the bytes this connection sends at
    /// its next flush, as Redis does with its reply buffer: a tick's replies and events then cost the
    /// pipeline one write, not one each. A large frame, or one whose write the caller waits for, goes
    /// to the channel as it is, after what was coalesced before it.
    private func write(_ frame: ByteBuffer, promise: EventLoopPromise<Void>? = nil) {
        guard let context = self.context else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        let bytes = frame.readableBytes
        self.countWritten(bytes, context: context) {
            if promise == nil, bytes <= Self.maxCoalescedFrameBytes {
                self.coalesce(frame)
            } else {
                self.handOffCoalesced(context: context, promise: nil)
                context.write(Self.wrapOutboundOut(frame), promise: promise)
            }
        }
    }

    /// Appends a small successful response to the frames this tick already coalesced, its headers and then its
    /// body copied once, without framing the body on its own first (an `Empty` reply then costs no buffer);
    /// returns the frame's length. `nil` sends it the usual way: the tick's first frame (kept as it is), an
    /// error, or a frame too large to coalesce or over the frame limit.
    private func coalesceResponse(_ response: OutboundResponse) -> Int? {
        guard self.coalesced != nil, let body = response.body, let context = self.context else { return nil }
        let payload = body.responsePayloadLength(id: response.id)
        let bytes = WireProtocol.lengthPrefixSize + payload
        guard bytes <= Self.maxCoalescedFrameBytes, payload <= self.configuration.maxFrameLength else { return nil }
        self.countWritten(bytes, context: context) {
            var buffer = self.takeOwnedCoalesced(adding: bytes)
            body.writeResponseFrame(id: response.id, into: &buffer)
            self.coalesced = buffer
        }
        return bytes
    }

    /// Counts `bytes` of frames as written (in ``outboundBytes`` and the uid's account, until the kernel takes
    /// them), has `put` place them, then schedules the flush or pauses reading, as the state machine says.
    private func countWritten(_ bytes: Int, context: ChannelHandlerContext, _ put: () -> Void) {
        let action = self.state.frameWritten(bytes: bytes)
        self.account.charge(bytes)
        put()
        switch action {
        case .none:
            break
        case .scheduleFlush:
            self.scheduleFlush(context: context)
        case .pauseReading(let scheduleFlush):
            self.metrics.outboundBackpressure.increment()
            self.logger.debug(
                "outbound bound reached; no longer reading this connection",
                metadata: ["outboundBytes": "\(self.outboundBytes)"]
            )
            if scheduleFlush { self.scheduleFlush(context: context) }
        }
    }

    /// Frames up to this size are copied into ``coalesced``; larger ones are written as they are.
    static let maxCoalescedFrameBytes = 8 * 1024
    /// The capacity a coalescing buffer starts with; it grows as frames are added (up to the outbound bounds).
    private static let coalescedBufferCapacity = 1024

    /// Adds `frame` to ``coalesced``. A tick's only frame is kept as it is (an event's frame is shared by
    /// every subscriber); the second one starts a buffer of this connection's own, holding copies.
    ///
    /// The buffer is taken out of ``coalesced`` while it is written to, so that it has one owner and grows in
    /// place: a copy of it still held (as the first frame once was, for the whole function) would make every
    /// write copy all of it.
    private func coalesce(_ frame: ByteBuffer) {
        guard self.coalesced != nil else {
            self.coalesced = frame
            self.coalescedIsOwned = false
            return
        }
        var buffer = self.takeOwnedCoalesced(adding: frame.readableBytes)
        buffer.writeImmutableBuffer(frame)
        self.coalesced = buffer
    }

    /// Takes ``coalesced`` (which holds at least one frame) as this connection's own buffer, copying the one
    /// frame it held into a new one first, with room for `bytes` more.
    private func takeOwnedCoalesced(adding bytes: Int) -> ByteBuffer {
        guard var buffer = self.coalesced.take() else {
            preconditionFailure("only a tick's second and later frames go into a buffer of the connection's own")
        }
        if !self.coalescedIsOwned {
            let first = buffer
            buffer = self.allocator.buffer(capacity: max(Self.coalescedBufferCapacity, first.readableBytes + bytes))
            buffer.writeImmutableBuffer(first)
            self.coalescedIsOwned = true
        }
        return buffer
    }

    /// Writes what was coalesced to the channel, with `promise`; returns whether there was anything.
    @discardableResult
    private func handOffCoalesced(context: ChannelHandlerContext, promise: EventLoopPromise<Void>?) -> Bool {
        guard let coalesced = self.coalesced else { return false }
        self.coalesced = nil
        context.write(Self.wrapOutboundOut(coalesced), promise: promise)
        return true
    }

    /// Resumes reading and tells the engine about room for events once enough has been written.
    private func checkDrained(soon: Bool) {
        if soon, let context = self.context {
            let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
            context.eventLoop.execute { handler.value.checkDrained(soon: false) }
            return
        }
        if self.state.outboundDrained() {
            self.logger.debug("outbound drained; reading again")
            self.resume()
        }
        self.checkEventsDrained()
    }

    /// Tells the engine there is room for the events it refused, once the connection's queue is back to half
    /// and its uid has room for a snapshot, which is reserved while the resets are taken.
    private func checkEventsDrained() {
        guard let context = self.context else { return }
        let reserved = self.budgets.snapshotReservation
        switch self.state.checkEventsDrained(roomForSnapshot: self.account.hasRoom(for: reserved)) {
        case .none:
            return
        case .waitForRoom:
            self.waitForRoom()
            return
        case .tellEngine:
            break
        }
        self.eventReservation += reserved
        self.account.charge(reserved)
        let id = self.id
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.onEngine { engine in
            await engine.sinkDrained(id)
            handler.value.resetsTaken(reserved)
        }
    }

    /// Gives back what is left of the reservation ``checkEventsDrained()`` made for the resets.
    private func resetsTaken(_ reserved: Int) {
        let left = min(self.eventReservation, reserved)
        self.eventReservation -= left
        self.account.release(left)
    }

    /// Flushes once at the end of this event-loop tick, after the engine work queued before it: with
    /// the loop's other connections when they share a ``TickFlusher``, else with a task of its own.
    private func scheduleFlush(context: ChannelHandlerContext) {
        if let flusher = self.flusher {
            flusher.flushAtEndOfTick(self)
            return
        }
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        context.eventLoop.execute {
            handler.value.state.scheduledFlushRan()
            handler.value.flushIfNeeded()
        }
    }

    /// The end-of-tick flush ``scheduleFlush()`` asked ``TickFlusher`` for.
    func flushScheduledWrites() {
        self.state.scheduledFlushRan()
        self.flushIfNeeded()
    }

    /// Flushes what was written since the last flush, and counts it out of ``outboundBytes`` once the
    /// kernel has taken all of it.
    ///
    /// No promise per flush: the channel's water marks (``everythingTaken``) make it writable exactly when it
    /// holds no byte unwritten, so a flush the kernel took at once is counted out here, and one it did not is
    /// counted out when the channel becomes writable again (``channelWritabilityChanged(context:)``).
    private func flushIfNeeded() {
        guard let context = self.context, self.state.flushRequested() != nil else { return }
        if let last = self.coalesced.take() {
            // Written and flushed in one pass through the pipeline.
            context.writeAndFlush(Self.wrapOutboundOut(last), promise: nil)
        } else {
            context.flush()
        }
        if self.context != nil, context.channel.isWritable { self.flushedBytesTaken() }
    }

    /// The kernel took every byte flushed, or the channel closed: counts them out of ``outboundBytes`` and
    /// the uid's account, then resumes what waited for room.
    private func flushedBytesTaken() {
        let bytes = self.state.flushedBytesTaken()
        guard bytes > 0 else { return }
        self.account.release(bytes)
        self.checkDrained(soon: false)
    }

    /// The write buffer water marks ``ConnectionHandler`` sets on its channel: it turns unwritable as soon as
    /// a byte waits (more than one, strictly: a frame has at least four) and writable again only once none
    /// does, so that writability says whether the kernel took everything flushed.
    static let everythingTaken = ChannelOptions.Types.WriteBufferWaterMark(low: 1, high: 1)

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.flushedBytesTaken() }
        context.fireChannelWritabilityChanged()
    }

    // MARK: Closing

    /// Tells the peer why, then closes the connection once that is written or the drain deadline passes.
    func failConnection(_ error: MentoryError) {
        guard case .close(let detach) = self.state.closeRequested() else { return }
        self.logger.debug("closing connection", metadata: ["reason": "\(error.message)"])
        if detach { self.detach() }
        self.inbound = Self.noBytes
        self.closeAfter(error)
    }

    /// The server is stopping: a closing `SHUTTING_DOWN` error, then close within the drain deadline.
    func shutDown() {
        self.failConnection(.shuttingDown)
    }

    private func closeAfter(_ error: MentoryError) {
        guard let context = self.context else { return }
        let frame = Self.connectionErrorFrame(error, closing: true, maxFrameLength: self.configuration.maxFrameLength)
        let written = context.eventLoop.makePromise(of: Void.self)
        let channel = context.channel
        let seconds = self.configuration.shutdownDrainSeconds
        let logger = self.logger
        let deadline = context.eventLoop.scheduleTask(in: .seconds(Int64(seconds))) {
            logger.notice(
                "closed a connection that did not take its last frames in time (\(seconds) s)",
                metadata: ["drainSeconds": "\(seconds)"]
            )
            channel.close(promise: nil)
        }
        written.futureResult.assumeIsolated().whenComplete { _ in
            deadline.cancel()
            channel.close(promise: nil)
        }
        self.write(frame, promise: written)
        self.flushIfNeeded()
    }

    // MARK: Engine

    /// Tells the engine this connection is gone (the state machine says when: once, if it was attached).
    private func detach() {
        let id = self.id
        self.onEngine { engine in engine.detach(id) }
    }

    /// Runs `operation` isolated to the engine without leaving this event loop.
    ///
    /// The engine's executor is this channel's event loop, so the task starts on it directly.
    private func onEngine(_ operation: @escaping @Sendable (isolated MentoryEngine) async -> Void) {
        _ = self.engine.assumeIsolated { engine in
            Task {
                await operation(engine)
            }
        }
    }
}
