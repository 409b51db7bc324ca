import Logging
import MentoryEngine
import MentoryWire
import NIOCore

/// Speaks the protocol on one connection: handshake, request routing, errors and back-pressure.
///
/// It holds only I/O state (the handshake phase and the ids in flight); every request goes to
/// the engine, which runs on this channel's event loop, so a request costs no thread hop.
final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = Mentory_V1_Envelope
    typealias OutboundOut = Mentory_V1_Envelope

    private enum Phase {
        case awaitingHello
        case open
        case closing
    }

    private let engine: MentoryEngine
    private let id: ConnectionID
    private let configuration: ServerConfiguration
    private let logger: Logger
    private let credentials: PeerCredentials?
    private var phase = Phase.awaitingHello
    private var inFlight: Set<UInt64> = []
    private var readHeldBack = false
    private var handshakeTimeout: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    init(
        engine: MentoryEngine,
        id: ConnectionID,
        configuration: ServerConfiguration,
        credentials: PeerCredentials?,
        logger: Logger
    ) {
        self.engine = engine
        self.id = id
        self.configuration = configuration
        self.credentials = credentials
        var logger = logger
        logger[metadataKey: "connection"] = "\(id)"
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        let seconds = self.configuration.handshakeTimeoutSeconds
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.handshakeTimeout = context.eventLoop.scheduleTask(in: .seconds(Int64(seconds))) {
            handler.value.failConnection(.handshakeTimeout(seconds: seconds))
        }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.handshakeTimeout?.cancel()
        if self.phase == .open {
            let id = self.id
            self.onEngine { engine in engine.detach(id) }
        }
        self.phase = .closing
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard self.phase != .closing else { return }
        let frame = Self.unwrapInboundIn(data)
        let envelope: Mentory_V1_Envelope
        do {
            envelope = try Mentory_V1_Envelope(frame: frame)
        } catch {
            self.sendConnectionError(.malformedMessage(error.reason), closing: false)
            return
        }
        switch envelope.kind {
        case .hello(let hello):
            self.handleHello(hello, context: context)
        case .request(let request):
            self.handleRequest(request, context: context)
        default:
            self.sendConnectionError(.malformedMessage("clients send only Hello and Request"), closing: false)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        switch error {
        case let error as FrameError:
            switch error {
            case .frameTooLarge(let length, let maximum):
                self.failConnection(.frameTooLarge(length: length, maximum: maximum))
            case .truncatedFrame:
                self.failConnection(.truncatedFrame)
            }
        default:
            self.logger.debug("connection error", metadata: ["error": "\(error)"])
            context.close(promise: nil)
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable, self.phase == .open {
            let id = self.id
            self.onEngine { engine in await engine.sinkDrained(id) }
        }
        context.fireChannelWritabilityChanged()
    }

    func read(context: ChannelHandlerContext) {
        if self.inFlight.count >= self.configuration.maxRequestsInFlight {
            self.readHeldBack = true
        } else {
            context.read()
        }
    }

    // MARK: Protocol

    private func handleHello(_ hello: Mentory_V1_Hello, context: ChannelHandlerContext) {
        guard self.phase == .awaitingHello else {
            self.sendConnectionError(.alreadyHandshaken, closing: false)
            return
        }
        guard hello.protocolVersion == WireProtocol.version else {
            self.failConnection(.unsupportedVersion(requested: hello.protocolVersion, supported: WireProtocol.version))
            return
        }
        self.handshakeTimeout?.cancel()
        self.phase = .open
        let connection = ConnectionContext(id: self.id, clientName: hello.clientName, credentials: self.credentials)
        let sink = ChannelEventSink(channel: context.channel)
        let maxFrameLength = UInt32(clamping: self.configuration.maxFrameLength)
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.logger.debug("handshake", metadata: ["client": "\(hello.clientName)"])
        self.onEngine { engine in
            var welcome = engine.attach(connection, sink: sink)
            welcome.maxFrameLength = maxFrameLength
            var envelope = Mentory_V1_Envelope()
            envelope.welcome = welcome
            handler.value.send(envelope)
        }
    }

    private func handleRequest(_ request: Mentory_V1_Request, context: ChannelHandlerContext) {
        guard self.phase == .open else {
            self.send(response: .failure(id: request.id, error: MentoryError.handshakeRequired.wireError))
            return
        }
        guard self.inFlight.insert(request.id).inserted else {
            self.send(response: .failure(id: request.id, error: MentoryError.duplicateRequestID(request.id).wireError))
            return
        }
        let id = self.id
        let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
        self.onEngine { engine in
            let response = await engine.dispatch(request, from: id)
            handler.value.finish(response)
        }
    }

    private func finish(_ response: Mentory_V1_Response) {
        self.inFlight.remove(response.id)
        self.send(response: response)
        if self.readHeldBack, self.inFlight.count < self.configuration.maxRequestsInFlight {
            self.readHeldBack = false
            self.context?.read()
        }
    }

    // MARK: Output

    private func send(response: Mentory_V1_Response) {
        var envelope = Mentory_V1_Envelope()
        envelope.response = response
        self.send(envelope)
    }

    private func send(_ envelope: Mentory_V1_Envelope) {
        self.context?.writeAndFlush(Self.wrapOutboundOut(envelope), promise: nil)
    }

    private func sendConnectionError(_ error: MentoryError, closing: Bool) {
        var connectionError = Mentory_V1_ConnectionError()
        connectionError.error = error.wireError
        connectionError.closing = closing
        var envelope = Mentory_V1_Envelope()
        envelope.connectionError = connectionError
        self.send(envelope)
    }

    /// Tells the peer why, then closes the connection.
    func failConnection(_ error: MentoryError) {
        guard self.phase != .closing, let context = self.context else { return }
        self.logger.debug("closing connection", metadata: ["reason": "\(error.message)"])
        self.sendConnectionError(error, closing: true)
        if self.phase == .open {
            let id = self.id
            self.onEngine { engine in engine.detach(id) }
        }
        self.phase = .closing
        context.close(promise: nil)
    }

    // MARK: Engine

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
