#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
import NIOConcurrencyHelpers
import MentoryWire
import SwiftProtobuf
import Synchronization

/// Who made a call the daemon forwarded to a plugin, and until when the answer is useful.
public struct PluginCallContext: Sendable {
    /// The daemon's id for the call; unique among the calls in flight to this plugin.
    public let callID: UInt64
    /// The method called (empty for a snapshot).
    public let method: String
    /// The caller's credentials and client name, as the daemon saw them.
    public let caller: Mentory_V1_PluginCaller
    /// When the daemon stops waiting: the caller then gets DEADLINE_EXCEEDED and the answer is dropped.
    public let deadline: ContinuousClock.Instant
    /// The connection the call came on, for ``call(_:_:)``.
    let client: MentoryClient?

    init(
        callID: UInt64, method: String, caller: Mentory_V1_PluginCaller, deadline: ContinuousClock.Instant,
        client: MentoryClient?
    ) {
        self.callID = callID
        self.method = method
        self.caller = caller
        self.deadline = deadline
        self.client = client
    }

    /// Whether the deadline has passed.
    public var isExpired: Bool { ContinuousClock.now >= self.deadline }

    /// Calls `method` of another namespace on behalf of this call's caller (`plugin.call`), while this
    /// call is in flight, and returns its reply.
    ///
    /// The daemon checks the caller's access to `method`, not the plugin's (a caller denied `diary.*`
    /// gets `PERMISSION_DENIED`), the call shares this call's deadline, it counts as one more of the
    /// caller's requests in flight (`TOO_MANY_REQUESTS` at once when the caller's uid is at its budget),
    /// and a call back into a namespace already on the way is refused (`INTERNAL`, naming the chain).
    /// Use it, never ``MentoryPlugin/client``, to fetch anything for a caller.
    public func call<Target, Request, Reply>(
        _ method: MethodSchema<Target, Request, Reply>,
        _ request: Request
    ) async throws(MentoryClientError) -> Reply {
        guard let client = self.client else {
            throw .connectionClosed(reason: "this call context has no connection to the daemon (made by hand)")
        }
        var message = Mentory_V1_PluginCallRequest()
        message.callID = self.callID
        message.namespace = method.namespace
        message.method = method.name
        message.body = try CallCoding.body(of: request)
        let reply = try await client.call(
            MentorySchema.Plugin.call, message,
            timeout: max(.milliseconds(1), self.deadline - ContinuousClock.now))
        return try CallCoding.reply(reply.body, as: Reply.self)
    }
}

/// A failure a plugin answers a call with: a stable code, a message a person can act on, and a
/// reason of the namespace's own (e.g. `advisor.no_rule`). Anything else a route throws is sent
/// as INTERNAL with its description.
public struct PluginError: Error, Sendable {
    public var code: Mentory_V1_ErrorCode
    public var message: String
    public var reason: String

    public init(code: Mentory_V1_ErrorCode, message: String, reason: String = "") {
        self.code = code
        self.message = message
        self.reason = reason
    }
}

/// How a plugin answers each method of its namespace and takes each topic's snapshot: the same
/// typed routes as an in-process handler, from the same generated schema.
public struct PluginRoutes<Namespace: NamespaceSchema>: Sendable {
    /// Answers a request.
    public typealias Respond<Request, Reply> = @Sendable (Request, PluginCallContext) async throws -> Reply
    /// Takes the current state of a topic.
    public typealias TakeSnapshot<Snapshot> = @Sendable () async throws -> Snapshot

    typealias Erased = @Sendable (Data, PluginCallContext) async throws -> Data

    private(set) var methods: [String: Erased] = [:]
    private(set) var snapshots: [String: @Sendable () async throws -> Data] = [:]

    public init() {}

    /// Answers `method` with `respond`.
    public mutating func on<Request, Reply>(
        _ method: MethodSchema<Namespace, Request, Reply>,
        _ respond: @escaping Respond<Request, Reply>
    ) {
        self.methods[method.name] = { body, context in
            let request: Request
            do {
                request = try Request(serializedBytes: body)
            } catch {
                throw PluginError(
                    code: .invalidArgument,
                    message: "the body of '\(method.name)' is not a valid \(Request.protoMessageName): \(error)")
            }
            return try await respond(request, context).serializedData()
        }
    }

    /// Takes `topic`'s snapshot with `take`: the body of snapshot and reset events.
    public mutating func snapshot<Change, Snapshot>(
        _ topic: TopicSchema<Namespace, Change, Snapshot>,
        _ take: @escaping TakeSnapshot<Snapshot>
    ) {
        self.snapshots[topic.name] = { try await take().serializedData() }
    }

    /// What the schema declares but the routes leave unanswered.
    var problems: [String] {
        Namespace.methods.filter { self.methods[$0.name] == nil }.map { "method '\($0.name)' has no route" }
            + Namespace.topics.filter { self.snapshots[$0.name] == nil }.map { "topic '\($0.name)' has no snapshot" }
    }
}

/// Serves a namespace from its own process: connects to mentoryd, registers the namespace, answers
/// the calls the daemon forwards, publishes on the namespace's topics, and reconnects and registers
/// again (with back-off) whenever the connection is lost, e.g. across daemon restarts.
///
/// ```swift
/// var routes = PluginRoutes<AdvisorSchema.Advisor>()
/// routes.on(AdvisorSchema.Advisor.suggest) { request, call in advice(for: request) }
/// let plugin = try MentoryPlugin(socketPath: path, routes: routes)
/// try await plugin.run()  // until cancelled
/// ```
public final class MentoryPlugin<Namespace: NamespaceSchema>: Sendable {
    /// What the plugin is doing now, as ``states`` reports it.
    public enum State: Sendable, Equatable {
        case connecting
        /// Registered; `epoch` is the daemon's.
        case registered(epoch: UInt64)
        /// The last attempt failed; the next one follows after the back-off.
        case waiting(reason: String)
    }

    private let socketPath: String
    private let clientName: String
    private let routes: PluginRoutes<Namespace>
    private let policy: ReconnectPolicy
    private let trust: SocketTrust
    private let current = NIOLockedValueBox<MentoryClient?>(nil)
    private let stateContinuation: AsyncStream<State>.Continuation
    /// Every state change, newest last; at most 64 wait unread (the oldest are dropped).
    public let states: AsyncStream<State>

    /// A plugin for `Namespace` with `routes`; throws ``PluginError`` when a method or topic has no route.
    public init(
        socketPath: String,
        clientName: String = "\(Namespace.name)-plugin",
        routes: PluginRoutes<Namespace>,
        reconnect: ReconnectPolicy = ReconnectPolicy(),
        trust: SocketTrust = .standard()
    ) throws(PluginError) {
        guard routes.problems.isEmpty else {
            throw PluginError(
                code: .internal,
                message: "the \(Namespace.name) plugin does not match its schema: "
                    + routes.problems.joined(separator: "; "))
        }
        self.socketPath = socketPath
        self.clientName = clientName
        self.routes = routes
        self.policy = reconnect
        self.trust = trust
        (self.states, self.stateContinuation) = AsyncStream.makeStream(
            of: State.self, bufferingPolicy: .bufferingNewest(64))
    }

    /// The registration this plugin sends: its namespace, methods, topics and descriptors.
    public static var registration: Mentory_V1_PluginRegisterRequest {
        var request = Mentory_V1_PluginRegisterRequest()
        request.pluginProtocolVersion = WireProtocol.pluginProtocolVersion
        request.namespace = Namespace.name
        request.version = Namespace.version
        let info = Namespace.info.wireDescription
        request.methods = info.methods
        request.topics = info.topics
        request.descriptors = SchemaDescriptors.merged([Namespace.fileDescriptors])
        return request
    }

    /// Connects, registers and serves until the task is cancelled, reconnecting with back-off.
    ///
    /// After a registration that worked is lost (a daemon restart), attempts come every
    /// ``ReconnectPolicy/quickRetryInterval`` for ``ReconnectPolicy/quickRetryWindow``, so that the
    /// plugin answers again within a fraction of a second of the daemon's being ready; then, and
    /// before the first registration, with the policy's growing back-off.
    ///
    /// Throws only when the daemon refuses the registration for good (PERMISSION_DENIED,
    /// INVALID_ARGUMENT) or the socket is untrusted; a lost connection or a conflicting instance
    /// is retried. A namespace the daemon's configuration does not declare (yet) is not for good: the
    /// plugin keeps its connection until a reload declares it, when the daemon closes it, and then
    /// registers again at once.
    public func run() async throws(MentoryClientError) {
        var attempt = 0
        /// When the last registration that worked ended; `nil` before the first.
        var lostAt: ContinuousClock.Instant?
        while !Task.isCancelled {
            self.stateContinuation.yield(.connecting)
            var connected: MentoryClient?
            do throws(MentoryClientError) {
                let client = try await MentoryClient.connect(
                    socketPath: self.socketPath, clientName: self.clientName, trust: self.trust)
                connected = client
                let reply = try await client.call(
                    MentorySchema.Plugin.register.namespace, MentorySchema.Plugin.register.name, Self.registration,
                    replying: Mentory_V1_PluginRegisterReply.self)
                attempt = 0
                self.current.withLockedValue { $0 = client }
                self.stateContinuation.yield(.registered(epoch: reply.epoch))
                await self.serve(client)
                lostAt = .now
                self.current.withLockedValue { $0 = nil }
                await client.close()
                self.stateContinuation.yield(.waiting(reason: "the connection closed"))
            } catch {
                switch error {
                case .untrustedSocket, .cancelled:
                    throw error
                case .remote(_, _, let reason) where reason == MentoryError.Reason.pluginNotDeclared:
                    // Not declared (yet): the daemon closes this connection once a reload declares the
                    // namespace (or when it stops); register again then, at once.
                    self.stateContinuation.yield(
                        .waiting(
                            reason: "mentoryd declares no plugin for namespace \(Namespace.name) yet; waiting for"
                                + " a reload that declares it (a plugins section in its configuration)"))
                    if let connected {
                        for await _ in connected.pluginCalls {}
                        await connected.close()
                    }
                    attempt = 0
                    lostAt = .now
                case .remote where error.remoteCode == .permissionDenied || error.remoteCode == .invalidArgument:
                    throw error
                default:
                    self.stateContinuation.yield(.waiting(reason: error.description))
                }
            }
            let sinceLoss = lostAt.map { ContinuousClock.now - $0 }
            do {
                try await Task.sleep(for: self.policy.delay(forAttempt: attempt, sinceLoss: sinceLoss))
            } catch {
                break
            }
            // The back-off grows only once the quick retries are over.
            if !self.policy.isQuickRetry(sinceLoss: sinceLoss) { attempt += 1 }
        }
        self.stateContinuation.finish()
    }

    /// Publishes `change` on one of the namespace's topics; fails when not registered now.
    public func publish<Change, Snapshot>(
        _ topic: TopicSchema<Namespace, Change, Snapshot>,
        _ change: Change
    ) async throws(MentoryClientError) {
        guard let client = self.current.withLockedValue({ $0 }) else {
            throw .connectionClosed(reason: "the plugin is not registered with mentoryd now")
        }
        var request = Mentory_V1_PluginPublishRequest()
        request.topic = topic.name
        do {
            request.body = try change.serializedData()
        } catch {
            throw .malformedReply("cannot serialize the change: \(error)")
        }
        _ = try await client.call(
            MentorySchema.Plugin.publish.namespace, MentorySchema.Plugin.publish.name, request,
            replying: Mentory_V1_Empty.self)
    }

    /// The client registered now, for calls to other namespaces; `nil` between connections.
    public var client: MentoryClient? { self.current.withLockedValue { $0 } }

    /// Answers every forwarded call, each in its own task, until the connection closes.
    private func serve(_ client: MentoryClient) async {
        let routes = self.routes
        await withDiscardingTaskGroup { group in
            for await call in client.pluginCalls {
                group.addTask {
                    client.reply(await Self.answer(call, routes: routes, client: client))
                }
            }
            // The connection is gone, and with it every caller: stop the calls still running.
            group.cancelAll()
        }
    }

    /// The answer to one call.
    static func answer(
        _ call: Mentory_V1_PluginCall, routes: PluginRoutes<Namespace>, client: MentoryClient? = nil
    ) async -> Mentory_V1_PluginReply {
        var reply = Mentory_V1_PluginReply()
        reply.callID = call.callID
        let context = PluginCallContext(
            callID: call.callID, method: call.method, caller: call.caller,
            deadline: .now + .milliseconds(Int64(call.timeoutMs)), client: client)
        do {
            if !call.snapshotTopic.isEmpty {
                guard let take = routes.snapshots[call.snapshotTopic] else {
                    throw PluginError(code: .invalidArgument, message: "no topic '\(call.snapshotTopic)'")
                }
                reply.body = try await take()
            } else {
                guard let respond = routes.methods[call.method] else {
                    throw PluginError(
                        code: .unknownMethod, message: "namespace '\(Namespace.name)' has no method '\(call.method)'")
                }
                reply.body = try await respond(call.body, context)
            }
        } catch let error as PluginError {
            reply.error = Mentory_V1_Error(code: error.code, message: error.message)
            reply.error.reason = error.reason
        } catch let error as MentoryError {
            reply.error = error.wireError
        } catch {
            reply.error = Mentory_V1_Error(
                code: .internal, message: "\(Namespace.name).\(call.method) failed: \(error)")
        }
        return reply
    }
}
