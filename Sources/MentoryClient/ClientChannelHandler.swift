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
    /// A call, numbered by the handler; a `nil` timeout waits for ever. Cancelling the call fails `reply`
    /// (a late answer to it is then skipped).
    case request(namespace: String, method: String, body: Data, timeout: Duration?, reply: EventLoopPromise<Data>)
    /// A plugin's answer to a `PluginCall`.
    case pluginReply(Mentory_V1_PluginReply)
}

/// The NIO driver of a connection's ``ClientProtocolCore``: feeds it the bytes read and the calls written,
/// and carries out what it decides (answer a promise, forward an event, close). Lives on the client's event
/// loop; the core numbers, encodes, frames, decodes and matches, this handler keeps the promises, the timers
/// and the streams.
final class ClientChannelHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ClientCommand
    typealias OutboundOut = Mentory_V1_Envelope

    /// What the handler keeps for a call until its answer.
    struct PendingCall {
        var promise: EventLoopPromise<Data>
        var timeout: Scheduled<Void>?
    }

    private var core: ClientProtocolCore<PendingCall>
    private var welcomePromise: EventLoopPromise<Mentory_V1_Welcome>?
    private let events: AsyncStream<Mentory_V1_Event>.Continuation
    private let pluginCalls: AsyncStream<Mentory_V1_PluginCall>.Continuation
    private let eventBufferLimit: Int
    private let overflow: EventOverflowFlag
    private let peerCheck: PeerCheck

    /// Creates the handler of a connection that says it is `clientName` and expects the daemon's answer in
    /// `welcome`; frames longer than `maxFrameLength` end the connection.
    ///
    /// `events` must buffer at most `eventBufferLimit` events (oldest kept); `peerCheck` vets the
    /// serving process before the hello is sent.
    init(
        clientName: String,
        maxFrameLength: Int,
        welcome: EventLoopPromise<Mentory_V1_Welcome>,
        events: AsyncStream<Mentory_V1_Event>.Continuation,
        pluginCalls: AsyncStream<Mentory_V1_PluginCall>.Continuation,
        eventBufferLimit: Int,
        overflow: EventOverflowFlag,
        peerCheck: @escaping PeerCheck
    ) {
        self.core = ClientProtocolCore(clientName: clientName, maxFrameLength: maxFrameLength)
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
            self.fail(context: context, .connectionClosed(reason: "cannot read the daemon's credentials"))
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
                    handler.fail(context: context, refusal)
                    return
                }
                guard handler.core.closeReason == nil else { return }
                context.writeAndFlush(Self.wrapOutboundOut(handler.core.hello()), promise: nil)
            case .failure(let error):
                handler.fail(
                    context: context, .connectionClosed(reason: "cannot read the daemon's credentials: \(error)"))
            }
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch Self.unwrapOutboundIn(data) {
        case .pluginReply(let reply):
            var envelope = Mentory_V1_Envelope()
            envelope.pluginReply = reply
            context.write(Self.wrapOutboundOut(envelope), promise: promise)
        case .request(let namespace, let method, let body, let timeout, let reply):
            if let closeReason = self.core.closeReason {
                reply.fail(closeReason)
                promise?.fail(closeReason)
                return
            }
            if self.overflow.isSet, namespace == WireNames.session, method == "subscribe" {
                // Events can no longer reach ``MentoryClient/events``; a subscription would be silent.
                reply.fail(MentoryClientError.eventBufferOverflow(limit: self.eventBufferLimit))
                promise?.succeed()
                return
            }
            let eventLoop = context.eventLoop
            let handler = NIOLoopBound(self, eventLoop: eventLoop)
            let request: (id: UInt64, envelope: Mentory_V1_Envelope)
            do {
                request = try self.core.startCall(
                    namespace: namespace, method: method, body: body, timeout: timeout
                ) { id in
                    PendingCall(
                        promise: reply,
                        timeout: timeout.map { timeout in
                            eventLoop.scheduleTask(in: Self.timeAmount(timeout)) {
                                handler.value.expire(id, after: timeout)
                            }
                        })
                }
            } catch {
                reply.fail(error)
                promise?.fail(error)
                return
            }
            context.write(Self.wrapOutboundOut(request.envelope), promise: promise)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.core.receive(Self.unwrapInboundIn(data))
        while let inbound = self.core.nextInbound() {
            switch inbound {
            case .welcomed(let welcome):
                self.welcomePromise?.succeed(welcome)
                self.welcomePromise = nil
            case .answered(_, let call, let result):
                call.timeout?.cancel()
                call.promise.completeWith(result.mapError { $0 as any Error })
            case .event(let event):
                guard !self.overflow.isSet else { continue }
                if case .dropped = self.events.yield(event) {
                    self.overflowed(context: context)
                }
            case .pluginCall(let call):
                // Bounded: a call dropped here is failed by the daemon at its deadline.
                _ = self.pluginCalls.yield(call)
            case .closed(let ending):
                self.ended(ending)
                context.close(promise: nil)
                return
            case .unmatchedResponse, .connectionNotice, .ignored:
                // Late answers to calls that timed out or were cancelled, errors that do not close.
                continue
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        self.fail(context: context, .connectionClosed(reason: "\(error)"))
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.ended(self.core.inputEnded())
        self.events.finish()
        self.pluginCalls.finish()
        context.fireChannelInactive()
    }

    /// Ends the connection for `reason` (unless it has ended already) and closes the channel.
    private func fail(context: ChannelHandlerContext, _ reason: MentoryClientError) {
        self.ended(self.core.close(reason))
        context.close(promise: nil)
    }

    /// Fails the handshake, if it is still awaited, and the calls still waiting, with the reason the connection ended.
    private func ended(_ ending: ClientProtocolCore<PendingCall>.Ending) {
        self.welcomePromise?.fail(ending.reason)
        self.welcomePromise = nil
        for call in ending.pendingCalls {
            call.timeout?.cancel()
            call.promise.fail(ending.reason)
        }
    }

    /// The consumer left `eventBufferLimit` events unread: stop delivering, end the stream after
    /// the buffered events, and end this connection's subscriptions so the daemon stops sending.
    private func overflowed(context: ChannelHandlerContext) {
        self.overflow.set()
        self.events.finish()
        // Nothing waits for the answer, which is skipped when it comes.
        guard
            let request = try? self.core.startCall(
                namespace: WireNames.session, method: "unsubscribe",
                body: (try? Mentory_V1_UnsubscribeRequest().serializedData()) ?? Data(), timeout: nil,
                pendingCall: { _ in nil })
        else { return }
        context.writeAndFlush(Self.wrapOutboundOut(request.envelope), promise: nil)
    }

    private func expire(_ id: UInt64, after timeout: Duration) {
        guard let call = self.core.abandonCall(id) else { return }
        call.promise.fail(MentoryClientError.timedOut(after: timeout))
    }

    /// `duration` as NIO's `TimeAmount`.
    static func timeAmount(_ duration: Duration) -> TimeAmount {
        .nanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }
}
