#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import MentoryWire
import NIOCore
import SwiftProtobuf
import Synchronization

/// Whether a client's event buffer overflowed; set on the event loop, read by the client.
final class EventOverflowFlag: Sendable {
    private let value = Atomic<Bool>(false)

    var isSet: Bool { self.value.load(ordering: .acquiring) }

    func set() { self.value.store(true, ordering: .releasing) }
}

/// Decides whether the process serving a socket may be talked to: given its uid and pid, the reason not to.
typealias PeerCheck = @Sendable (_ uid: UInt32, _ pid: Int32) -> MentoryClientError?

/// What the client asks its channel to send.
enum ClientCommand {
    case request(
        id: UInt64, namespace: String, method: String, body: Data, timeout: TimeAmount?, EventLoopPromise<Data>)
    case cancel(id: UInt64)
    /// A plugin's answer to a `PluginCall`.
    case pluginReply(Mentory_V1_PluginReply)
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
    private let pluginCalls: AsyncStream<Mentory_V1_PluginCall>.Continuation
    private let eventBufferLimit: Int
    private let overflow: EventOverflowFlag
    private let peerCheck: PeerCheck

    private let hello: Mentory_V1_Hello

    /// The request id of the unsubscribe sent on overflow; clients number their requests from 1.
    private static let overflowUnsubscribeID: UInt64 = 0

    /// Creates the handler of a connection that opens with `hello` and expects its answer in `welcome`.
    ///
    /// `events` must buffer at most `eventBufferLimit` events (oldest kept); `peerCheck` vets the
    /// serving process before the hello is sent.
    init(
        hello: Mentory_V1_Hello,
        welcome: EventLoopPromise<Mentory_V1_Welcome>,
        events: AsyncStream<Mentory_V1_Event>.Continuation,
        pluginCalls: AsyncStream<Mentory_V1_PluginCall>.Continuation,
        eventBufferLimit: Int,
        overflow: EventOverflowFlag,
        peerCheck: @escaping PeerCheck
    ) {
        self.hello = hello
        self.welcomePromise = welcome
        self.events = events
        self.pluginCalls = pluginCalls
        self.eventBufferLimit = eventBufferLimit
        self.overflow = overflow
        self.peerCheck = peerCheck
    }

    func channelActive(context: ChannelHandlerContext) {
        context.fireChannelActive()
        // Nothing is written before the serving process is known to be trusted.
        guard let provider = context.channel as? any SocketOptionProvider else {
            self.refuse(context: context, .connectionClosed(reason: "cannot read the daemon's credentials"))
            return
        }
        // `struct ucred` (pid, uid, gid) is not visible from Swift without _GNU_SOURCE; three
        // 32-bit fields read as a homogeneous tuple have its exact layout.
        let credentials: EventLoopFuture<(UInt32, UInt32, UInt32)> = provider.unsafeGetSocketOption(
            level: NIOBSDSocket.OptionLevel(rawValue: SOL_SOCKET),
            name: NIOBSDSocket.Option(rawValue: SO_PEERCRED)
        )
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        credentials.whenComplete { result in
            let (handler, context) = bound.value
            switch result {
            case .success(let (pid, uid, _)):
                if let refusal = handler.peerCheck(uid, Int32(bitPattern: pid)) {
                    handler.refuse(context: context, refusal)
                    return
                }
                var envelope = Mentory_V1_Envelope()
                envelope.hello = handler.hello
                context.writeAndFlush(Self.wrapOutboundOut(envelope), promise: nil)
            case .failure(let error):
                handler.refuse(
                    context: context, .connectionClosed(reason: "cannot read the daemon's credentials: \(error)"))
            }
        }
    }

    private func refuse(context: ChannelHandlerContext, _ reason: MentoryClientError) {
        self.closeReason = reason
        self.welcomePromise?.fail(reason)
        self.welcomePromise = nil
        context.close(promise: nil)
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
        case .pluginReply(let reply):
            envelope.pluginReply = reply
        case .request(let id, let namespace, let method, let body, let timeout, let reply):
            if let closeReason = self.closeReason {
                reply.fail(closeReason)
                promise?.fail(closeReason)
                return
            }
            if self.overflow.isSet, namespace == WireNames.session, method == "subscribe" {
                // Events can no longer reach ``MentoryClient/events``; a subscription would be silent.
                let error = MentoryClientError.eventBufferOverflow(limit: self.eventBufferLimit)
                reply.fail(error)
                promise?.succeed()
                return
            }
            envelope.request = CallCoding.request(
                id: id, namespace: namespace, method: method, body: body, timeoutNanoseconds: timeout?.nanoseconds)
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
            guard !self.overflow.isSet else { return }
            if case .dropped = self.events.yield(event) {
                self.overflowed(context: context)
            }
        case .connectionError(let connectionError):
            let error = MentoryClientError(connectionError.error)
            if connectionError.closing {
                self.closeReason = error
                self.welcomePromise?.fail(error)
                self.welcomePromise = nil
            }
        case .pluginCall(let call):
            // Bounded: a call dropped here is failed by the daemon at its deadline.
            _ = self.pluginCalls.yield(call)
        case .hello, .request, .pluginReply, nil:
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
        self.pluginCalls.finish()
        context.fireChannelInactive()
    }

    /// The consumer left `eventBufferLimit` events unread: stop delivering, end the stream after
    /// the buffered events, and end this connection's subscriptions so the daemon stops sending.
    private func overflowed(context: ChannelHandlerContext) {
        self.overflow.set()
        self.events.finish()
        var envelope = Mentory_V1_Envelope()
        var request = Mentory_V1_Request()
        request.id = Self.overflowUnsubscribeID
        request.namespace = WireNames.session
        request.method = "unsubscribe"
        request.body = (try? Mentory_V1_UnsubscribeRequest().serializedData()) ?? Data()
        envelope.request = request
        context.writeAndFlush(Self.wrapOutboundOut(envelope), promise: nil)
    }

    private func expire(_ id: UInt64, after timeout: TimeAmount) {
        guard let entry = self.pending.removeValue(forKey: id) else { return }
        entry.promise.fail(MentoryClientError.timedOut(seconds: Double(timeout.nanoseconds) / 1e9))
    }
}
