import Logging
import MentoryEngine
import MentoryHandlerKit
import MentoryWire
import NIOCore

/// Speaks the protocol on one connection: a thin driver of its parts, on the connection's event loop, which is the
/// engine's executor (a request costs no thread hop; docs/ARCHITECTURE.md has the bounds).
///
/// - ``ConnectionStateMachine`` owns the protocol state: the lifecycle, the requests in flight and their
///   reservations, the duplicate-id check, every bound. Each thing its transport reports and each engine call
///   becomes an event for it; this connection performs the action it returns.
/// - ``InboundFrames`` holds the bytes read and splits them into frames as they are handled.
/// - ``OutboundFrameBuffer`` coalesces a tick's small frames and flushes them, once a tick (with ``TickFlusher``).
/// - The uid's ``UIDAccount`` (``UIDBudgets``) counts what the uid's connections hold, and wakes them.
/// - Its ``ConnectionTransport`` moves the bytes: a NIO channel (``ConnectionHandler``) or a socket on an epoll
///   loop (``SocketConnection``), which report what happens to the stream through this class's internal methods.
final class Connection {
    private let engine: MentoryEngine
    private let id: ConnectionID
    private let configuration: ServerConfiguration
    private let logger: Logger
    private let credentials: PeerCredentials?
    private let metrics: ServerMetrics
    /// Shared by the connections of this event loop; `nil` flushes with a task of this connection's own.
    private let flusher: TickFlusher?
    private let budgets: UIDBudgets
    /// This connection's uid's share of ``budgets`` (its sink counts the calls made on the client's behalf).
    let account: UIDAccount
    /// The protocol state, mutated in place; and the two byte streams.
    private var state: ConnectionStateMachine
    private var inbound: InboundFrames
    private var outbound = OutboundFrameBuffer()
    /// The byte stream, from ``attach(to:isActive:)`` until ``removed()``.
    private var transport: (any ConnectionTransport)?

    init(
        engine: MentoryEngine, id: ConnectionID, configuration: ServerConfiguration, credentials: PeerCredentials?,
        logger: Logger, metrics: ServerMetrics? = nil, flusher: TickFlusher? = nil, budgets: UIDBudgets? = nil
    ) {
        self.flusher = flusher
        self.state = ConnectionStateMachine(configuration)
        self.inbound = InboundFrames(maxFrameLength: configuration.maxFrameLength)
        let budgets = budgets ?? UIDBudgets(configuration)
        self.budgets = budgets
        self.account = budgets.open(uid: credentials?.uid)
        self.engine = engine
        self.id = id
        self.configuration = configuration
        self.credentials = credentials
        self.metrics = metrics ?? ServerMetrics(factory: engine.metricsFactory)
        var logger = logger
        logger[metadataKey: "connection"] = "\(id)"
        self.logger = logger
    }

    /// Starts speaking over `transport`; `isActive` says whether its peer is connected already.
    func attach(to transport: any ConnectionTransport, isActive: Bool) {
        // The frames of every read are handled isolated to the engine on the strength of this check (see
        // ``handlePendingFrames()``): the engine's executor is this connection's event loop.
        self.engine.preconditionIsolated("a connection's event loop must be the engine's executor")
        self.transport = transport
        self.outbound.allocator = transport.allocator
        if isActive { self.startHandshakeTimer(on: transport.eventLoop) }
    }

    /// The transport is gone: settles what it held.
    func removed() {
        self.transport = nil
        self.outbound.discard()
        // Written but never flushed, or flushed but never taken: nothing else will count these out.
        let removed = self.state.handlerRemoved()
        if removed.discardedBytes > 0 { self.account.release(removed.discardedBytes) }
        if removed.closeAccount { self.account.connectionClosed(self) }
    }

    /// The peer is connected.
    func activated() {
        if let eventLoop = self.transport?.eventLoop { self.startHandshakeTimer(on: eventLoop) }
    }

    /// Fails the connection if it still awaits its Hello when the timeout passes (not cancelled: needless then).
    private func startHandshakeTimer(on eventLoop: any EventLoop) {
        guard self.state.handshakeTimerNeeded() else { return }
        let seconds = self.configuration.handshakeTimeoutSeconds
        let connection = NIOLoopBound(self, eventLoop: eventLoop)
        eventLoop.scheduleTask(in: .seconds(Int64(seconds))) {
            guard connection.value.state.isAwaitingHello else { return }
            connection.value.failConnection(.handshakeTimeout(seconds: seconds))
        }
    }

    /// The stream is closed: what was flushed and not taken never will be.
    func inactive() {
        self.flushedBytesTaken()
        if self.state.channelInactive() { self.detach() }
        self.inbound.discard()
    }

    /// The peer sent `bytes`.
    func received(_ bytes: ByteBuffer) {
        guard !self.state.isClosing else { return }
        self.inbound.append(bytes)
        self.handlePendingFrames()
        self.inbound.releaseIfHandled()
    }

    /// A read's bytes are all handled.
    func readCompleted() {
        // With a loop-wide flusher, the replies of this read go out with the other connections' at the tick's end.
        if self.flusher == nil { self.flushIfNeeded() }
    }

    /// The peer closed its writing side: a frame cut short gets TRUNCATED_FRAME, then close; else just close.
    func inputClosed() {
        if !self.state.isClosing {
            self.handlePendingFrames()
            if let error = self.inbound.unfinishedFrame() { self.failConnection(MentoryError(error)) }
        }
        if self.state.inputClosed() {
            self.logger.debug("peer closed its side")
            self.flushIfNeeded()
            self.transport?.close()
        }
    }

    /// The stream failed: closes it.
    func errorCaught(_ error: any Error) {
        self.logger.debug("connection error", metadata: ["error": "\(error)"])
        self.state.errorCaught()
        self.transport?.close()
    }

    /// Whether the transport may read again now that the last read is handled; may start waiting for budget.
    func readRequested() -> Bool {
        let action = self.state.readRequested(
            hasWholeFrame: self.inbound.hasWholeFrame, uidHasRoom: self.account.hasRoom)
        if case .holdBack(waitForBudget: true) = action { self.waitForBudget() }
        return action == .read
    }

    // MARK: Inbound

    /// Asks the account to wake this connection once its uid has room again (the machine asks once until woken).
    private func waitForBudget() {
        self.metrics.budgetWaits.increment()
        self.logger.waitsForBudget(self.account)
        self.account.wait(self)
    }

    /// The account has room again: handles what waited, next tick (not inside the release that freed it).
    func budgetFreed() {
        self.state.budgetAvailable()
        guard let eventLoop = self.transport?.eventLoop else { return }
        let connection = NIOLoopBound(self, eventLoop: eventLoop)
        eventLoop.execute {
            connection.value.resume()
            connection.value.checkEventsDrained()
        }
    }

    /// Handles the frames read, in order, while there is room, isolated to the engine as `assumeIsolated` would.
    private func handlePendingFrames() {
        guard let transport = self.transport else { return }
        transport.eventLoop.preconditionInEventLoop()
        // SAFETY: one of two unchecked isolations. Calling the engine-isolated function as a non-isolated one is
        // sound on the engine's executor alone: attach's preconditionIsolated proved it is this transport's loop
        // (a transport keeps its loop), and preconditionInEventLoop, in release too, that we are on it; nothing
        // escapes.
        let isolated: (isolated MentoryEngine, Connection) -> Void = {
            $0.openBatch()  // What it answers at once is recorded together, as the replies are written.
            $1.handlePendingFrames($0)
            $0.closeBatch(received: $1.inbound.endBatch())
        }
        unsafeBitCast(isolated, to: ((MentoryEngine, Connection) -> Void).self)(self.engine, self)
    }

    private func handlePendingFrames(_ engine: isolated MentoryEngine) {
        while self.state.canHandleFrames {
            let next: ByteBuffer?
            do {
                next = try self.inbound.next()
            } catch {
                return self.failConnection(MentoryError(error))
            }
            guard let frame = next else { return }
            let costsNoReply = InboundFrames.costsNoReply(frame)
            switch self.state.frameReady(costsNoReply: costsNoReply, uidHasRoom: self.account.hasRoom) {
            case .handle: self.inbound.consume(frame)
            case .holdBack: return
            case .waitForBudget: return self.waitForBudget()
            }
            switch ClientMessage(frame: consume frame) {
            case .request(let request): self.handleRequest(request, engine)
            case .hello(let hello): self.handleHello(hello)
            case .pluginReply(let reply): self.handlePluginReply(reply, engine)
            case .malformed(let error): self.sendConnectionError(error, closing: false)
            }
        }
    }

    /// Handles what waited, then reads again if a read was held back and nothing waits any more.
    private func resume() {
        self.handlePendingFrames()
        guard let transport = self.transport else { return }
        if self.state.readMayResume(hasWholeFrame: self.inbound.hasWholeFrame) { transport.read() }
    }

    private func handleHello(_ hello: Mentory_V1_Hello) {
        guard let transport = self.transport else { return }
        switch self.state.helloReceived(hello) {
        case .attach: break
        case .refuse(let error): return self.sendConnectionError(error, closing: false)
        case .fail(let error): return self.failConnection(error)
        }
        let connection = ConnectionContext(id: self.id, clientName: hello.clientName, credentials: self.credentials)
        let sink = ConnectionEventSink(connection: NIOLoopBound(self, eventLoop: transport.eventLoop))
        self.logger.debug("handshake", metadata: ["client": "\(hello.clientName)"])
        // Attached at once, so a request pipelined right behind the Hello finds its connection.
        var welcome = self.engine.assumeIsolated { engine in engine.attach(connection, sink: sink) }
        welcome.maxFrameLength = UInt32(clamping: self.configuration.maxFrameLength)
        guard self.state.isOpen else { return }
        switch ServerFrameEncoder.welcomeFrame(welcome, maxFrameLength: self.configuration.maxFrameLength) {
        case .success(let frame): self.write(frame)
        case .failure(let error): self.failConnection(error)
        }
    }

    private func handleRequest(_ request: InboundRequest, _ engine: isolated MentoryEngine) {
        let queued: Bool
        switch self.transport == nil ? .refuse(.handshakeRequired) : self.state.requestReceived(id: request.id) {
        case .dispatch(let isQueued): queued = isQueued
        case .refuse(let error):
            var response = OutboundResponse.failure(id: request.id, error: error.wireError)
            self.send(response: &response)
            return
        }
        // Answered here, with no task, unless it suspends or waits its turn behind a request in flight.
        switch engine.respond(to: request, from: self.id, received: self.inbound.received(), queued: queued) {
        case .answered(var response):
            if !self.state.isClosing {
                self.send(response: &response, method: "\(request.namespace).\(request.method)")
            }
        case .suspended(_, let queuesSnapshots):
            // Reserved before the task starts (it cannot before this returns); the response comes to `finish`.
            let method = "\(request.namespace).\(request.method)"
            let reply = self.budgets.reservation(for: method)
            let snapshots = queuesSnapshots ? self.budgets.snapshotReservation : 0
            self.state.requestSuspended(id: request.id, method: method, replyBytes: reply, snapshotBytes: snapshots)
            self.account.charge(reply + snapshots)
            self.account.requestStarted()
        }
    }

    private func handlePluginReply(_ reply: Mentory_V1_PluginReply, _ engine: isolated MentoryEngine) {
        if case .refuse(let error) = self.state.pluginReplyReceived() {
            return self.sendConnectionError(error, closing: false)
        }
        engine.pluginReply(reply, from: self.id)
    }

    /// The response to a request, from the engine: sent, and the request's reservations settled.
    func finish(_ response: consuming OutboundResponse) {
        switch self.state.responseReady(id: response.id) {
        case .sendUnreserved(let send):
            if send { self.send(response: &response) }
        case .finished(let method, let send, let releaseBytes):
            if send { self.budgets.learn(method, replyBytes: self.send(response: &response, method: method)) }
            // Settled after the reply was counted, so the account does not dip below what it holds.
            self.account.release(releaseBytes)
            self.account.requestFinished()
        }
        self.resume()
    }

    /// Delivers an event to the peer, or refuses it (`false`; the engine sends a reset once the queue drains).
    func deliver(_ shared: SharedEvent) -> Bool {
        // Sizes and the account rather than the frame and the transport: nothing is retained to decide.
        let (bytes, account) = (shared.frame.readableBytes, self.account)
        let (action, written) = self.state.eventWritten(
            frameBytes: bytes, payloadLength: shared.payloadLength, onChannel: self.transport != nil
        ) { account.hasRoom(for: bytes, ownReserved: $0) }
        switch action {
        case .drop: return false
        case .refuseTooLarge:
            self.logger.eventTooLarge(shared, maxFrameLength: self.configuration.maxFrameLength)
            // A change gets a reset soon; a reset or snapshot too large waits for the next drain (it cannot loop).
            if shared.kind == .change, let eventLoop = self.transport?.eventLoop {
                let connection = NIOLoopBound(self, eventLoop: eventLoop)
                eventLoop.execute { connection.value.checkDrained() }
            }
            return false
        case .refuse(let waitForBudget):
            if waitForBudget { self.waitForBudget() }
            return false
        case .write(let releaseReserved):
            if let written {
                self.countWritten(bytes, counted: written)
                self.outbound.write(event: shared, sharing: self.flusher?.eventRuns, transport: self.transport)
            }
            if releaseReserved > 0 { account.release(releaseReserved) }
            return true
        }
    }

    /// Sends a call to the plugin, or refuses it (`false`) over the frame limit or the outbound bound (hung?).
    func deliver(pluginCall: Mentory_V1_PluginCall) -> Bool {
        guard self.state.isOpen else { return false }
        let frame = ServerFrameEncoder.pluginCallFrame(pluginCall, maxFrameLength: self.configuration.maxFrameLength)
        guard let frame, self.state.pluginCallFits(bytes: frame.readableBytes) else { return false }
        self.write(frame)
        return true
    }

    // MARK: Output

    /// Sends `response`, taking its reply body out of it to frame in place; returns the bytes of its frame.
    @discardableResult
    private func send(response: inout OutboundResponse, method: @autoclosure () -> String = "?") -> Int {
        let maxFrameLength = self.configuration.maxFrameLength
        switch self.outbound.frame(&response, method: method, maxFrameLength: maxFrameLength, logger: self.logger) {
        case .appended(let bytes):
            if self.transport != nil { self.countWritten(bytes) }
            return bytes
        case .frame(let frame, let size):
            self.write(frame)
            return size
        }
    }

    private func sendConnectionError(_ error: MentoryError, closing: Bool, promise: EventLoopPromise<Void>? = nil) {
        let maxFrameLength = self.configuration.maxFrameLength
        let frame = ServerFrameEncoder.connectionErrorFrame(error, closing: closing, maxFrameLength: maxFrameLength)
        self.write(frame, promise: promise)
    }

    /// Writes one frame without flushing, counts it until the kernel has taken it, and makes sure a flush follows.
    private func write(_ frame: ByteBuffer, promise: EventLoopPromise<Void>? = nil) {
        guard let transport = self.transport else {
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        self.countWritten(frame.readableBytes)
        self.outbound.write(frame, promise: promise, transport: transport)
    }

    /// Counts `bytes` written (in the machine, `counted`, and the uid's account), then schedules the flush or pauses.
    private func countWritten(_ bytes: Int, counted: ConnectionStateMachine.FrameWrittenAction? = nil) {
        let action = counted ?? self.state.frameWritten(bytes: bytes)
        self.account.charge(bytes)
        switch action {
        case .none: break
        case .scheduleFlush: self.scheduleFlush()
        case .pauseReading(let scheduleFlush):
            self.metrics.outboundBackpressure.increment()
            self.logger.outboundBoundReached(self.state.outboundBytes)
            if scheduleFlush { self.scheduleFlush() }
        }
    }

    /// Resumes reading and tells the engine about room for events once enough has been written.
    private func checkDrained() {
        if self.state.outboundDrained() {
            self.logger.debug("outbound drained; reading again")
            self.resume()
        }
        self.checkEventsDrained()
    }

    /// Tells the engine there is room for the events it refused, the snapshot reserved while the resets are taken.
    private func checkEventsDrained() {
        guard let eventLoop = self.transport?.eventLoop else { return }
        let reserved = self.budgets.snapshotReservation
        switch self.state.checkEventsDrained(
            snapshotBytes: reserved, roomForSnapshot: self.account.hasRoom(for: reserved))
        {
        case .none: return
        case .waitForBudget: return self.waitForBudget()
        case .tellEngine: self.account.charge(reserved)
        }
        let id = self.id
        let connection = NIOLoopBound(self, eventLoop: eventLoop)
        self.engine.assumeIsolated { engine in
            engine.startDrain(id) {
                connection.value.account.release(connection.value.state.resetsTaken(reserved: reserved))
            }
        }
    }

    /// Flushes once at the end of this tick: with the loop's other connections (``TickFlusher``), or on its own.
    private func scheduleFlush() {
        if let flusher = self.flusher { return flusher.flushAtEndOfTick(self) }
        guard let eventLoop = self.transport?.eventLoop else { return }
        let connection = NIOLoopBound(self, eventLoop: eventLoop)
        eventLoop.execute { connection.value.flushScheduledWrites() }
    }

    /// The end-of-tick flush ``scheduleFlush()`` asked for.
    func flushScheduledWrites() {
        self.state.scheduledFlushRan()
        self.flushIfNeeded()
    }

    /// Flushes what was written; the transport says whether the kernel took it all, or later that it has.
    ///
    /// The frames are taken out before the transport runs, so that no access to the buffer is held while it does:
    /// a flush may read, and a request read then may append its reply (a route answered at once).
    private func flushIfNeeded() {
        guard let transport = self.transport, self.state.flushRequested() != nil else { return }
        let taken = transport.flush(self.outbound.take())
        if taken, self.transport != nil { self.flushedBytesTaken() }
    }

    /// The kernel took every byte flushed, or the stream closed: counts them out, resumes what waited for room.
    func flushedBytesTaken() {
        let bytes = self.state.flushedBytesTaken()
        guard bytes > 0 else { return }
        self.account.release(bytes)
        self.checkDrained()
    }

    // MARK: Closing

    /// Tells the peer why, then closes the connection once that is written or the drain deadline passes.
    func failConnection(_ error: MentoryError) {
        guard case .close(let detach) = self.state.closeRequested() else { return }
        self.logger.debug("closing connection", metadata: ["reason": "\(error.message)"])
        if detach { self.detach() }
        self.inbound.discard()
        guard let transport = self.transport else { return }
        let (eventLoop, seconds) = (transport.eventLoop, self.configuration.shutdownDrainSeconds)
        let written = eventLoop.makePromise(of: Void.self)
        let connection = NIOLoopBound(self, eventLoop: eventLoop)
        eventLoop.close(after: written.futureResult, drainSeconds: seconds, logger: self.logger) {
            connection.value.transport?.close()
        }
        self.sendConnectionError(error, closing: true, promise: written)
        self.flushIfNeeded()
    }

    /// Tells the engine this connection is gone (the state machine says when: once, if it was attached), once
    /// what runs now has returned: the engine may be calling this connection's sink.
    private func detach() {
        let (id, engine) = (self.id, self.engine)
        guard let loop = self.transport?.eventLoop else { return engine.assumeIsolated { engine in engine.detach(id) } }
        loop.execute { engine.assumeIsolated { engine in engine.detach(id) } }
    }
}
