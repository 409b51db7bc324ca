#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import Logging
import MentoryMetrics
import MentoryWire
import SwiftProtobuf

/// The one owner of mentoryd's session state.
///
/// Connections hand it requests and receive events through an ``EventSink``; handler modules
/// registered in it do the domain work while isolated to it. Give it the server's event loop as
/// its executor and a request costs no hop between threads.
public actor MentoryEngine {
    /// Settings fixed at start-up.
    public struct Configuration: Sendable {
        /// The version string the daemon reports.
        public var serverVersion: String
        /// How many recent events each topic keeps for resuming subscribers.
        public var eventRingCapacity: Int
        /// Who may call what; can be replaced later with ``MentoryEngine/updateAccessPolicy(_:)``.
        public var accessPolicy: AccessPolicy
        /// The user the daemon runs as, trusted like root by the access policy (its peers could read
        /// the daemon's files anyway); `nil` trusts only root. Defaults to the process's effective uid.
        public var daemonUID: UInt32?
        /// The largest reply body the engine itself builds (`session.metrics`), to fit one frame:
        /// `ReplyBudget.bodyBytes(maxFrameLength:)` of the server's frame limit.
        public var maxReplyBytes: Int

        public init(
            serverVersion: String,
            eventRingCapacity: Int = 4096,
            accessPolicy: AccessPolicy = .default,
            daemonUID: UInt32? = geteuid(),
            maxReplyBytes: Int = ReplyBudget.defaultBodyBytes
        ) {
            self.serverVersion = serverVersion
            self.eventRingCapacity = eventRingCapacity
            self.accessPolicy = accessPolicy
            self.daemonUID = daemonUID
            self.maxReplyBytes = maxReplyBytes
        }
    }

    struct Connection {
        var context: ConnectionContext
        var sink: any EventSink
    }

    private let executor: any SerialExecutor
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        self.executor.asUnownedSerialExecutor()
    }

    /// The engine's settings.
    public nonisolated let configuration: Configuration
    /// The source of wall-clock time for handlers.
    public nonisolated let clock: any SessionClock
    /// A random number drawn at start-up; sequence numbers are only comparable within one epoch.
    public nonisolated let epoch: UInt64
    /// The engine's logger.
    public nonisolated let logger: Logger
    /// Where the daemon's metrics are kept; `session.metrics` replies with its snapshot.
    public nonisolated let metricsFactory: MentoryMetricsFactory
    /// The engine's own metric objects, created once.
    let metrics: EngineMetrics

    let startedAt = ContinuousClock.now
    var handlers: [String: any MentoryHandler] = [:]
    var registrationOrder: [String] = []
    var topicOwners: [String: String] = [:]
    private var states: [ObjectIdentifier: AnyObject] = [:]
    var connections: [ConnectionID: Connection] = [:]
    var logs: [String: EventLog] = [:]
    /// Every subscription, indexed both by connection and by topic.
    var subscriptions = Subscriptions()
    private var isShuttingDown = false
    private(set) var accessPolicy: AccessPolicy
    private var lastDenialLogged: ContinuousClock.Instant?
    private var suppressedDenials = 0

    /// Creates an engine that runs on `executor`.
    ///
    /// `metrics` is where the engine records and what `session.metrics` reports: the daemon passes
    /// the factory it bootstrapped swift-metrics with; by default the engine keeps its own.
    public init(
        configuration: Configuration,
        executor: any SerialExecutor,
        clock: any SessionClock = SystemSessionClock(),
        logger: Logger = Logger(label: "mentoryd.engine"),
        metrics: MentoryMetricsFactory = MentoryMetricsFactory()
    ) {
        self.configuration = configuration
        self.executor = executor
        self.clock = clock
        self.logger = logger
        self.metricsFactory = metrics
        self.metrics = EngineMetrics(factory: metrics)
        self.epoch = UInt64.random(in: 1...UInt64.max)
        self.accessPolicy = configuration.accessPolicy
    }

    /// Replaces the access policy, e.g. after a configuration reload. Applies to the next request.
    public func updateAccessPolicy(_ policy: AccessPolicy) {
        self.accessPolicy = policy
    }

    /// Logs a refused action, at most once a second; the rest are counted in the next line.
    func logDenial(_ action: String, connection: ConnectionContext) {
        let now = ContinuousClock.now
        if let last = self.lastDenialLogged, now - last < .seconds(1) {
            self.suppressedDenials += 1
            return
        }
        self.logger.warning(
            "permission denied",
            metadata: [
                "action": "\(action)",
                "peer": "\(connection.credentials.map(\.description) ?? "unknown")",
                "client": "\(connection.clientName)",
                "suppressed": "\(self.suppressedDenials)",
            ]
        )
        self.lastDenialLogged = now
        self.suppressedDenials = 0
    }

    // MARK: Handler registry

    /// Registers `handler` under its namespace and opens it.
    package func register(_ handler: any MentoryHandler) async throws(MentoryError) {
        let namespace = handler.namespace
        guard namespace != WireNames.session, self.handlers[namespace] == nil else {
            throw .internal("namespace '\(namespace)' is already registered")
        }
        for topic in handler.topics {
            guard self.topicOwners[topic] == nil else {
                throw .internal("topic '\(topic)' is already published by '\(self.topicOwners[topic]!)'")
            }
        }
        try await self.scoped(namespace) { engine throws(MentoryError) in try await handler.open(engine: engine) }
        self.handlers[namespace] = handler
        self.registrationOrder.append(namespace)
        for topic in handler.topics {
            self.topicOwners[topic] = namespace
            self.logs[topic] = EventLog(capacity: self.configuration.eventRingCapacity)
        }
        self.logger.debug("registered handler", metadata: ["namespace": "\(namespace)"])
    }

    /// Closes every handler, last registered first. Requests after this get ``MentoryError/shuttingDown``.
    package func closeHandlers() async {
        self.isShuttingDown = true
        for namespace in self.registrationOrder.reversed() {
            guard let handler = self.handlers[namespace] else { continue }
            await HandlerScope.$namespace.withValue(namespace) { await handler.close(engine: self) }
        }
    }

    /// Every registered handler, in registration order, as the handshake lists them.
    public var handlerDescriptions: [Mentory_V1_HandlerDescription] {
        var descriptions: [Mentory_V1_HandlerDescription] = []
        var session = Mentory_V1_HandlerDescription()
        session.namespace = WireNames.session
        session.methods = SessionMethod.allCases.map(\.rawValue)
        descriptions.append(session)
        for namespace in self.registrationOrder {
            descriptions.append(self.handlers[namespace]!.handlerDescription)
        }
        return descriptions
    }

    /// The engine-owned state object of type `State`, created on first use.
    public func state<State: HandlerState>(_ type: State.Type) -> State {
        let key = ObjectIdentifier(type)
        if let existing = self.states[key] {
            // The dictionary is keyed by the type itself, so the cast cannot fail.
            return unsafeDowncast(existing, to: State.self)
        }
        let created = State()
        self.states[key] = created
        return created
    }

    // MARK: Connections

    /// Introduces a connection that completed its handshake and returns the server's greeting.
    package func attach(_ context: ConnectionContext, sink: any EventSink) -> Mentory_V1_Welcome {
        self.connections[context.id] = Connection(context: context, sink: sink)
        var welcome = Mentory_V1_Welcome()
        welcome.protocolVersion = WireProtocol.version
        welcome.serverVersion = self.configuration.serverVersion
        welcome.handlers = self.handlerDescriptions
        welcome.epoch = self.epoch
        return welcome
    }

    /// Forgets a connection: drops its subscriptions and tells every handler.
    ///
    /// A snapshot or reset still being taken for it is abandoned when it completes, and a
    /// `subscribe` still running for it subscribes nothing more.
    package func detach(_ id: ConnectionID) {
        guard self.connections.removeValue(forKey: id) != nil else { return }
        self.subscriptions.removeAll(id)
        for namespace in self.registrationOrder {
            let handler = self.handlers[namespace]!
            HandlerScope.$namespace.withValue(namespace) { handler.connectionClosed(id, engine: self) }
        }
    }

    /// The number of connections that completed the handshake.
    public var connectionCount: Int { self.connections.count }

    /// The number of connections subscribed to at least one topic.
    public var subscriberCount: Int { self.subscriptions.connectionCount }

    /// The topics connection `id` is subscribed to, sorted.
    package func subscribedTopics(of id: ConnectionID) -> [String] {
        self.subscriptions.topics(of: id).sorted()
    }

    /// The connections subscribed to `topic`.
    package func subscriberIDs(of topic: String) -> Set<ConnectionID> {
        self.subscriptions.subscribers(of: topic)
    }

    /// Whether the subscription indexes agree with each other and name only attached connections.
    package var subscriptionsAreConsistent: Bool {
        self.subscriptions.checkInvariants(attached: Set(self.connections.keys))
    }

    /// Returns at once; used as a liveness probe that proves the engine's executor is running jobs.
    public func probeLiveness() -> UInt64 { self.epoch }

    // MARK: Requests

    /// Routes `request` to its handler and returns the response to send back.
    ///
    /// Every failure becomes an error response; nothing here closes the connection.
    package func dispatch(_ request: Mentory_V1_Request, from id: ConnectionID) async -> Mentory_V1_Response {
        do throws(MentoryError) {
            let body = try await self.route(request, from: id)
            return .success(id: request.id, body: body)
        } catch {
            if case .internal = error {
                self.logger.error(
                    "request failed",
                    metadata: ["namespace": "\(request.namespace)", "method": "\(request.method)", "error": "\(error)"]
                )
            }
            return .failure(id: request.id, error: error.wireError)
        }
    }

    private func route(_ request: Mentory_V1_Request, from id: ConnectionID) async throws(MentoryError) -> Data {
        guard !self.isShuttingDown else { throw .shuttingDown }
        guard let connection = self.connections[id] else { throw .handshakeRequired }
        guard
            self.accessPolicy.allowsCall(
                connection.context.credentials,
                namespace: request.namespace,
                method: request.method,
                daemonUID: self.configuration.daemonUID
            )
        else {
            self.logDenial("\(request.namespace).\(request.method)", connection: connection.context)
            throw .permissionDenied(namespace: request.namespace, method: request.method)
        }
        let call = HandlerCall(method: request.method, body: request.body, connection: connection.context)
        if request.namespace == WireNames.session {
            return try await self.handleSession(call)
        }
        guard let handler = self.handlers[request.namespace] else {
            throw .unknownNamespace(request.namespace)
        }
        return try await self.scoped(request.namespace) { engine throws(MentoryError) in
            try await handler.handle(call, engine: engine)
        }
    }

    /// Runs `body` as handler `namespace`: only its own topics may be published on meanwhile.
    ///
    /// The scope is a task-local value, so it follows the handler's work across suspension points
    /// (and into tasks it starts) while other handlers' requests interleave on the engine.
    func scoped<Value: Sendable>(
        _ namespace: String,
        _ body: (isolated MentoryEngine) async throws(MentoryError) -> Value
    ) async throws(MentoryError) -> Value {
        let outcome: Result<Value, MentoryError> = await HandlerScope.$namespace.withValue(namespace) {
            do throws(MentoryError) {
                return .success(try await body(self))
            } catch {
                return .failure(error)
            }
        }
        return try outcome.get()
    }

    // MARK: Publishing

    /// Publishes a change on `topic` to every subscriber and keeps it for resuming ones.
    ///
    /// Only the handler that declared `topic` may publish on it, from its own requirements (or
    /// tasks they start): any other publish is refused, logged as an error, and sends nothing.
    public func publish(_ body: some SwiftProtobuf.Message, on topic: String) {
        guard let owner = self.topicOwners[topic], var log = self.logs[topic] else {
            self.logger.error("publish on unregistered topic", metadata: ["topic": "\(topic)"])
            return
        }
        guard let publisher = HandlerScope.namespace, publisher == owner else {
            self.logger.error(
                "refused a publish on a topic another handler owns",
                metadata: [
                    "topic": "\(topic)", "owner": "\(owner)", "publisher": "\(HandlerScope.namespace ?? "none")",
                ]
            )
            return
        }
        var event = Mentory_V1_Event()
        event.topic = topic
        event.kind = .change
        event.body = body.wireBody()
        event.epoch = self.epoch
        event = log.append(event)
        self.logs[topic] = log
        self.metrics.recordPublished(topic)
        for id in self.subscriptions.subscribers(of: topic) {
            self.deliver(event, to: id)
        }
    }

    /// The sequence number of the newest event on `topic`.
    public func lastSequence(of topic: String) -> UInt64 {
        self.logs[topic]?.lastSequence ?? 0
    }

    /// Tells the engine that a connection's event queue has room again; topics that overflowed get a reset.
    ///
    /// Only overflowed topics get one, and each is marked resetting first, so calling this again
    /// while a reset is being taken starts no second reset for the same topic.
    package func sinkDrained(_ id: ConnectionID) async {
        for topic in self.subscriptions.overflowed(of: id) {
            // An earlier suspension may have let another drain begin this topic's reset already.
            guard let generation = self.subscriptions.beginReset(id, topic) else { continue }
            do throws(MentoryError) {
                try await self.sendState(of: topic, to: id, kind: .reset, generation: generation)
            } catch {
                // Logged by sendState; the next drain tries again.
                self.subscriptions.setDelivery(.overflowed, id, topic)
            }
        }
    }

    func deliver(_ event: Mentory_V1_Event, to id: ConnectionID) {
        guard self.subscriptions.entry(id, event.topic)?.delivery == .live, let connection = self.connections[id]
        else { return }
        if !connection.sink.deliver(event) {
            self.subscriptions.setDelivery(.overflowed, id, event.topic)
            self.logger.debug(
                "subscriber queue full; a reset will follow",
                metadata: ["connection": "\(id)", "topic": "\(event.topic)"]
            )
        }
    }

    /// Sends the current state of `topic` as a snapshot or reset, then any events published meanwhile.
    ///
    /// The subscription must be `.resetting` under `generation`. Taking a snapshot may suspend
    /// (a store read), and events published meanwhile are replayed from the ring after it. Should
    /// the ring have moved past the snapshot's sequence by then, replaying would leave a gap, so
    /// the snapshot is taken again until the ring still covers it. Should the connection detach
    /// or the subscription be replaced meanwhile, the snapshot is dropped: the newer owner of the
    /// subscription sends its own. Throws only when the handler fails to take the snapshot.
    func sendState(
        of topic: String,
        to id: ConnectionID,
        kind: Mentory_V1_EventKind,
        generation: UInt64
    ) async throws(MentoryError) {
        guard let owner = self.topicOwners[topic], let handler = self.handlers[owner] else { return }
        var attempts = 0
        while true {
            let sequence = self.lastSequence(of: topic)
            let body: Data
            do throws(MentoryError) {
                body = try await self.scoped(owner) { engine throws(MentoryError) in
                    try await handler.snapshot(of: topic, engine: engine)
                }
            } catch {
                self.logger.error("snapshot failed", metadata: ["topic": "\(topic)", "error": "\(error)"])
                throw error
            }
            // The snapshot reflects at least every event up to `sequence`; events published while it
            // was being taken follow it, so nothing is lost and no sequence number repeats.
            guard self.subscriptions.entry(id, topic)?.generation == generation,
                let connection = self.connections[id]
            else { return }
            guard self.logs[topic]?.events(after: sequence) != nil else {
                attempts += 1
                if attempts.isMultiple(of: 16) {
                    self.logger.warning(
                        "events outpace snapshots; consider a larger events.ringCapacity",
                        metadata: ["topic": "\(topic)", "attempts": "\(attempts)"]
                    )
                }
                continue
            }
            var event = Mentory_V1_Event()
            event.topic = topic
            event.kind = kind
            event.sequence = sequence
            event.body = body
            event.epoch = self.epoch
            guard connection.sink.deliver(event) else {
                self.subscriptions.setDelivery(.overflowed, id, topic)
                return
            }
            if kind == .reset { self.metrics.recordReset(topic) }
            self.subscriptions.setDelivery(.live, id, topic)
            self.replay(topic, after: sequence, to: id)
            return
        }
    }

    func replay(_ topic: String, after sequence: UInt64, to id: ConnectionID) {
        for event in self.logs[topic]?.events(after: sequence) ?? [] {
            self.deliver(event, to: id)
        }
    }
}

/// The handler on whose behalf the current task runs, if any; publishing checks it.
enum HandlerScope {
    @TaskLocal static var namespace: String?
}
