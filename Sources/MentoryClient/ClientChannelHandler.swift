#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryWire
import NIOCore

/// What the client asks its channel to send.
enum ClientCommand {
    case request(
        id: UInt64, namespace: String, method: String, body: Data, timeout: TimeAmount?, EventLoopPromise<Data>)
    case cancel(id: UInt64)
}

/// Matches responses to requests by id and forwards events. Lives on the client's event loop.
final class ClientChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ClientCommand
    typealias OutboundOut = Mentory_V1_Envelope

    private struct Pending {
        var promise: EventLoopPromise<Data>
        var timeout: Scheduled<Void>?
    }

    private var pending: [UInt64: Pending] = [:]
    private var welcomePromise: EventLoopPromise<Mentory_V1_Welcome>?
    private var closeReason: MentoryClientError?
    private let events: AsyncStream<Mentory_V1_Event>.Continuation

    private let hello: Mentory_V1_Hello

    /// Creates the handler of a connection that opens with `hello` and expects its answer in `welcome`.
    init(
        hello: Mentory_V1_Hello,
        welcome: EventLoopPromise<Mentory_V1_Welcome>,
        events: AsyncStream<Mentory_V1_Event>.Continuation
    ) {
        self.hello = hello
        self.welcomePromise = welcome
        self.events = events
    }

    func channelActive(context: ChannelHandlerContext) {
        var envelope = Mentory_V1_Envelope()
        envelope.hello = self.hello
        context.writeAndFlush(Self.wrapOutboundOut(envelope), promise: nil)
        context.fireChannelActive()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        var envelope = Mentory_V1_Envelope()
        switch Self.unwrapOutboundIn(data) {
        case .cancel(let id):
            if let entry = self.pending.removeValue(forKey: id) {
                entry.timeout?.cancel()
                entry.promise.fail(CancellationError())
            }
            promise?.succeed()
            return
        case .request(let id, let namespace, let method, let body, let timeout, let reply):
            if let closeReason = self.closeReason {
                reply.fail(closeReason)
                promise?.fail(closeReason)
                return
            }
            var request = Mentory_V1_Request()
            request.id = id
            request.namespace = namespace
            request.method = method
            request.body = body
            envelope.request = request
            var entry = Pending(promise: reply)
            if let timeout {
                let handler = NIOLoopBound(self, eventLoop: context.eventLoop)
                entry.timeout = context.eventLoop.scheduleTask(in: timeout) {
                    handler.value.expire(id, after: timeout)
                }
            }
            self.pending[id] = entry
        }
        context.write(Self.wrapOutboundOut(envelope), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let envelope: Mentory_V1_Envelope
        do {
            envelope = try Mentory_V1_Envelope(frame: Self.unwrapInboundIn(data))
        } catch {
            self.closeReason = .malformedReply(error.reason)
            context.close(promise: nil)
            return
        }
        switch envelope.kind {
        case .welcome(let welcome):
            self.welcomePromise?.succeed(welcome)
            self.welcomePromise = nil
        case .response(let response):
            guard let entry = self.pending.removeValue(forKey: response.id) else { return }
            entry.timeout?.cancel()
            switch response.result {
            case .body(let body):
                entry.promise.succeed(body)
            case .error(let error):
                entry.promise.fail(MentoryClientError(error))
            case nil:
                entry.promise.succeed(Data())
            }
        case .event(let event):
            self.events.yield(event)
        case .connectionError(let connectionError):
            let error = MentoryClientError(connectionError.error)
            if connectionError.closing {
                self.closeReason = error
                self.welcomePromise?.fail(error)
                self.welcomePromise = nil
            }
        case .hello, .request, nil:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if self.closeReason == nil {
            self.closeReason = .connectionClosed(reason: "\(error)")
        }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        let reason = self.closeReason ?? .connectionClosed(reason: "the daemon closed the connection")
        self.closeReason = reason
        self.welcomePromise?.fail(reason)
        self.welcomePromise = nil
        let pending = self.pending
        self.pending.removeAll()
        for entry in pending.values {
            entry.timeout?.cancel()
            entry.promise.fail(reason)
        }
        self.events.finish()
        context.fireChannelInactive()
    }

    private func expire(_ id: UInt64, after timeout: TimeAmount) {
        guard let entry = self.pending.removeValue(forKey: id) else { return }
        entry.promise.fail(MentoryClientError.timedOut(seconds: Double(timeout.nanoseconds) / 1e9))
    }
}
