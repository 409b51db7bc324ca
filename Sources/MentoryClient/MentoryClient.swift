#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import MentoryDomain
import MentoryWire
import NIOCore
import NIOPosix
import SwiftProtobuf

/// A connection to mentoryd.
///
/// Calls may be made concurrently from any task; they are pipelined on the one connection and
/// matched to their responses by id. Events for this connection's subscriptions arrive on
/// ``events``.
///
/// A client only talks to a socket that passes ``SocketTrust``: its directory, and the uid of the
/// process serving it, checked before anything is sent.
public final class MentoryClient: Sendable {
    /// The server's handshake answer: its version and its handlers.
    public let welcome: Mentory_V1_Welcome
    /// Events pushed to this connection, in the order the daemon sent them, without gaps.
    ///
    /// At most `eventBufferLimit` (``defaultEventBufferLimit`` unless given to `connect`)
    /// events wait here unread. When one more arrives the buffer overflows: the events already
    /// buffered are still delivered, then the stream ends, ``eventBufferOverflowed`` turns true,
    /// the connection's subscriptions are ended and a new `subscribe` on it fails with
    /// ``MentoryClientError/eventBufferOverflow(limit:)``. Nothing is lost silently: the end of
    /// the stream with ``eventBufferOverflowed`` set is the marker that a reset is needed, i.e.
    /// resubscribe on a new connection from the last event processed (the daemon then replays
    /// what was missed or sends a `RESET`); `resumableSubscription`
    /// does this by itself. Also finishes when the connection closes. Calls keep working after an overflow.
    public let events: AsyncStream<Mentory_V1_Event>
    /// Calls the daemon forwards to this connection once it registered as a plugin (see ``MentoryPlugin``);
    /// at most ``pluginCallBufferLimit`` wait unread (a call dropped beyond that fails at its deadline).
    /// Finishes when the connection closes. Answer each with ``reply(_:)``.
    public let pluginCalls: AsyncStream<Mentory_V1_PluginCall>
    /// The socket this client is connected to.
    public let socketPath: String
    /// How long a call waits for its answer by default; `nil` waits for ever.
    public let defaultTimeout: Duration?

    private let channel: any Channel
    private let overflow: EventOverflowFlag

    /// The largest frame a client accepts by default: snapshots of a long diary exceed the 1 MiB request limit.
    public static let defaultMaxInboundFrameLength = 64 << 20

    /// How many unread events a client buffers by default before it overflows (see ``events``).
    public static let defaultEventBufferLimit = 4096

    /// How many forwarded plugin calls wait unread at most (see ``pluginCalls``).
    public static let pluginCallBufferLimit = 1024

    /// Whether more than the buffer limit of events were left unread, which ended ``events``.
    public var eventBufferOverflowed: Bool { self.overflow.isSet }

    private init(
        channel: any Channel,
        welcome: Mentory_V1_Welcome,
        events: AsyncStream<Mentory_V1_Event>,
        pluginCalls: AsyncStream<Mentory_V1_PluginCall>,
        overflow: EventOverflowFlag,
        socketPath: String,
        defaultTimeout: Duration?
    ) {
        self.channel = channel
        self.welcome = welcome
        self.events = events
        self.pluginCalls = pluginCalls
        self.overflow = overflow
        self.socketPath = socketPath
        self.defaultTimeout = defaultTimeout
    }

    /// Connects to the daemon at `socketPath` and performs the handshake.
    ///
    /// Throws ``MentoryClientError/untrustedSocket(path:reason:)`` without sending anything when
    /// the socket fails `trust`'s checks. `eventBufferLimit` (at least 1) bounds ``events``.
    public static func connect(
        socketPath: String,
        clientName: String,
        defaultTimeout: Duration? = .seconds(30),
        maxFrameLength: Int = MentoryClient.defaultMaxInboundFrameLength,
        eventBufferLimit: Int = MentoryClient.defaultEventBufferLimit,
        trust: SocketTrust = .standard(),
        eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws(MentoryClientError) -> MentoryClient {
        try trust.checkDirectory(ofSocket: socketPath)
        let eventBufferLimit = max(1, eventBufferLimit)
        let (events, continuation) = AsyncStream.makeStream(
            of: Mentory_V1_Event.self,
            bufferingPolicy: .bufferingOldest(eventBufferLimit)
        )
        let (pluginCalls, pluginCallContinuation) = AsyncStream.makeStream(
            of: Mentory_V1_PluginCall.self,
            bufferingPolicy: .bufferingOldest(Self.pluginCallBufferLimit)
        )
        let overflow = EventOverflowFlag()
        let peerCheck: PeerCheck = { uid, pid in
            do throws(MentoryClientError) {
                try trust.checkPeer(uid: uid, pid: pid, path: socketPath)
                return nil
            } catch {
                return error
            }
        }
        // The handler sends the hello as soon as the connection is up and owns the welcome promise
        // from the start, so a daemon that refuses the connection (and closes it) is always heard.
        let eventLoop = eventLoopGroup.next()
        let welcomePromise = eventLoop.makePromise(of: Mentory_V1_Welcome.self)
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: eventLoop)
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandlers([
                            MessageToByteHandler(EnvelopeFrameEncoder()),
                            ClientChannelHandler(
                                clientName: clientName,
                                maxFrameLength: maxFrameLength,
                                welcome: welcomePromise,
                                events: continuation,
                                pluginCalls: pluginCallContinuation,
                                eventBufferLimit: eventBufferLimit,
                                overflow: overflow,
                                peerCheck: peerCheck
                            ),
                        ])
                    }
                }
                .connect(unixDomainSocketPath: socketPath)
                .get()
        } catch {
            let failure = MentoryClientError.cannotConnect(path: socketPath, reason: Self.describe(error))
            welcomePromise.fail(failure)
            continuation.finish()
            pluginCallContinuation.finish()
            throw failure
        }
        // The handshake is bounded like any call: a daemon that accepts but never answers fails it.
        let handshakeTimeout = defaultTimeout.map { limit in
            channel.eventLoop.scheduleTask(in: ClientChannelHandler.timeAmount(limit)) {
                welcomePromise.fail(MentoryClientError.timedOut(after: limit))
            }
        }
        let welcome: Mentory_V1_Welcome
        do {
            defer { handshakeTimeout?.cancel() }
            // A cancelled caller (e.g. ``MentoryConnection/close()``) stops waiting at once.
            welcome = try await withTaskCancellationHandler {
                try await welcomePromise.futureResult.get()
            } onCancel: {
                welcomePromise.fail(MentoryClientError.cancelled)
            }
        } catch {
            try? await channel.close()
            throw Self.clientError(error)
        }
        return MentoryClient(
            channel: channel,
            welcome: welcome,
            events: events,
            pluginCalls: pluginCalls,
            overflow: overflow,
            socketPath: socketPath,
            defaultTimeout: defaultTimeout
        )
    }

    /// Calls `namespace.method` with a serialized body and returns the serialized reply.
    public func call(
        _ namespace: String,
        _ method: String,
        body: Data,
        timeout: Duration? = nil
    ) async throws(MentoryClientError) -> Data {
        if Task.isCancelled {
            throw .cancelled
        }
        let promise = self.channel.eventLoop.makePromise(of: Data.self)
        self.channel.writeAndFlush(
            ClientCommand.request(
                namespace: namespace, method: method, body: body, timeout: timeout ?? self.defaultTimeout,
                reply: promise),
            promise: Self.failing(promise)
        )
        do {
            return try await withTaskCancellationHandler {
                try await promise.futureResult.get()
            } onCancel: {
                // The call stays pending on the connection until its answer (then skipped) or its timeout.
                promise.fail(CancellationError())
            }
        } catch is CancellationError {
            throw .cancelled
        } catch {
            throw Self.clientError(error)
        }
    }

    /// Calls `namespace.method` with a request message and decodes the reply as `Reply`.
    public func call<Reply: SwiftProtobuf.Message>(
        _ namespace: String,
        _ method: String,
        _ request: some SwiftProtobuf.Message,
        replying: Reply.Type = Reply.self,
        timeout: Duration? = nil
    ) async throws(MentoryClientError) -> Reply {
        let reply = try await self.call(namespace, method, body: try CallCoding.body(of: request), timeout: timeout)
        return try CallCoding.reply(reply, as: Reply.self)
    }

    /// Calls a method the schema declares, e.g. `client.call(MentorySchema.Diary.add, request)`; the
    /// request and reply types are the ones its `rpc` declares.
    public func call<Namespace, Request, Reply>(
        _ method: MethodSchema<Namespace, Request, Reply>,
        _ request: Request,
        timeout: Duration? = nil
    ) async throws(MentoryClientError) -> Reply {
        try await self.call(method.namespace, method.name, request, replying: Reply.self, timeout: timeout)
    }

    /// Sends a plugin's answer to a call from ``pluginCalls``; dropped if the connection closed.
    public func reply(_ reply: Mentory_V1_PluginReply) {
        self.channel.writeAndFlush(ClientCommand.pluginReply(reply), promise: nil)
    }

    /// Whether the connection is still open.
    public var isConnected: Bool { self.channel.isActive }

    /// Closes the connection. Calls still waiting fail with ``MentoryClientError/connectionClosed(reason:)``.
    public func close() async {
        try? await self.channel.close()
    }

    /// Starts closing the connection without waiting, for places that cannot wait (deinit).
    func closeSoon() {
        self.channel.close(promise: nil)
    }

    /// A write promise that fails `reply` when the request never reaches the connection's handler.
    ///
    /// A request written after the channel closed bypasses the (already removed) handler, which
    /// is the only place that would otherwise answer `reply`; without this the call would wait
    /// for ever, whatever its timeout.
    private static func failing(_ reply: EventLoopPromise<Data>) -> EventLoopPromise<Void> {
        let written = reply.futureResult.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenFailure { error in
            // A reply already answered (e.g. by the handler) ignores this.
            reply.fail(
                error as? MentoryClientError
                    ?? .connectionClosed(reason: "the connection closed before the call was sent")
            )
        }
        return written
    }

    private static func clientError(_ error: any Error) -> MentoryClientError {
        if let error = error as? MentoryClientError { return error }
        return .connectionClosed(reason: Self.describe(error))
    }

    private static func describe(_ error: any Error) -> String {
        if let error = error as? IOError {
            return error.description
        }
        return "\(error)"
    }
}
